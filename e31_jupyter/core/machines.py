"""The machines a policy places jobs on, pure: free GPUs per machine, and where a job of a given
size goes (``Cluster``). The live queue is one machine; the simulator has many."""

from __future__ import annotations

from collections.abc import Sequence


class Cluster:
    """Free GPUs per machine. A job of up to ``machine_gpus`` GPUs goes on one machine, the fullest
    it fits on (best fit keeps machines whole for big jobs); a bigger job takes whole machines.
    The live queue is one machine.

    Machines sit in buckets by their free GPUs, so "does it fit" and "where" cost a few steps
    however many machines there are.
    """

    def __init__(self, free: Sequence[int], machine_gpus: int, sizes: Sequence[int] | None = None):
        self.machine_gpus = machine_gpus
        self.sizes = list(sizes) if sizes is not None else [machine_gpus] * len(free)
        self.gpus = sum(self.sizes)
        self._largest = max(self.sizes, default=0)
        self._whole_machines = sum(1 for size in self.sizes if size == machine_gpus)
        self.free = list(free)
        self.free_gpus = sum(self.free)
        self._max: int | None = None  # cached _most_free()
        self._at: list[set[int]] = [set() for _ in range(machine_gpus + 1)]
        for m, f in enumerate(self.free):
            self._at[f].add(m)

    @classmethod
    def of(cls, gpus: int, machine_gpus: int) -> Cluster:
        """``gpus`` GPUs, all free, in machines of ``machine_gpus`` (the last one may be smaller)."""
        whole, rest = divmod(gpus, machine_gpus)
        sizes = [machine_gpus] * whole + ([rest] if rest else [])
        return cls(sizes, machine_gpus, sizes)

    @classmethod
    def one_machine(cls, gpus: int, free: int) -> Cluster:
        return cls([max(free, 0)], gpus, [gpus])

    def copy(self) -> Cluster:
        """The same machines, free GPUs kept apart: a pass copies the cluster for every trial
        placement, so what never changes is shared instead of worked out again."""
        other = object.__new__(Cluster)
        other.__dict__.update(self.__dict__)
        other.free = self.free.copy()
        other._at = [machines.copy() for machines in self._at]
        return other

    def taken(self, gpus: int) -> int:
        """GPUs a job holds on each of its machines."""
        return max(gpus, 0) if gpus <= self.machine_gpus else self.machine_gpus

    def machines_for(self, gpus: int) -> int:
        """How many whole machines a job bigger than one machine takes."""
        return -(-gpus // self.machine_gpus)

    def can_ever_fit(self, gpus: int) -> bool:
        if gpus <= 0:
            return True
        if gpus <= self.machine_gpus:
            return self._largest >= gpus
        return self.machine_gpus > 0 and self._whole_machines >= self.machines_for(gpus)

    def fits(self, gpus: int) -> bool:
        if gpus <= 0:
            return True
        if gpus <= self.machine_gpus:
            return self._most_free() >= gpus
        return len(self._at[self.machine_gpus]) >= self.machines_for(gpus)  # the whole machines

    def place(self, gpus: int, avoid: frozenset[int] = frozenset(), strict: bool = False) -> tuple[int, ...] | None:
        """Take GPUs for a job: the machines it got, or None when it does not fit. Machines in
        ``avoid`` are used only when nothing else fits, or never when ``strict``."""
        machines = self._choose(gpus, avoid) if avoid else None
        if machines is None and not (avoid and strict):
            machines = self._choose(gpus, frozenset())
        if machines is not None:
            self.hold(machines, gpus)
        return machines

    def hold(self, machines: tuple[int, ...], gpus: int) -> None:
        for m in machines:
            self._set(m, self.free[m] - self.taken(gpus))

    def release(self, machines: tuple[int, ...], gpus: int) -> None:
        for m in machines:
            self._set(m, self.free[m] + self.taken(gpus))

    def _choose(self, gpus: int, avoid: frozenset[int]) -> tuple[int, ...] | None:
        if gpus <= 0:
            return ()
        if gpus <= self.machine_gpus:
            for f in range(gpus, self.machine_gpus + 1):
                choices = self._at[f] - avoid if avoid else self._at[f]
                if choices:
                    return (min(choices),)
            return None
        whole = self._whole(avoid)
        need = self.machines_for(gpus)
        return tuple(sorted(whole)[:need]) if len(whole) >= need else None

    def _most_free(self) -> int:
        """The most free GPUs on one machine."""
        if self._max is None:
            self._max = next((f for f in range(self.machine_gpus, -1, -1) if self._at[f]), 0)
        return self._max

    def _whole(self, avoid: frozenset[int]) -> set[int]:
        """Machines of full size with every GPU free: those with machine_gpus free (a smaller
        machine never has as many)."""
        return self._at[self.machine_gpus] - avoid

    def _set(self, m: int, free: int) -> None:
        self._at[self.free[m]].discard(m)
        self._at[free].add(m)
        self._max = None
        self.free_gpus += free - self.free[m]
        self.free[m] = free
