"""The scheduling server's eye on its GPUs: every ``c.E31.gpu_sample_s`` it reads them
(``execution/nvml.py``), keeps each running job's use in its record, warns of idle GPUs (and
takes them back with ``c.E31.idle_gpu_action = "release"``), and keeps the GPUs that processes
outside the queue use from being handed out. What readings mean is ``core/gpu_use.py``'s."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from e31_jupyter.core import gpu_use
from e31_jupyter.core.gpu_use import DeviceReading, GpuProcess, WatchRules
from e31_jupyter.core.states import JobState
from e31_jupyter.execution.nvml import NvmlAbsent
from e31_jupyter.service.job_files import JobFiles
from e31_jupyter.service.job_record import JobRecord
from e31_jupyter.service.store import Store

log = logging.getLogger("e31")

Reader = Callable[[Sequence[str]], list[DeviceReading]]


class GpuWatch:
    def __init__(self, store: Store, files: JobFiles, inventory: list[str], rules: WatchRules, read: Reader, clock):
        self.store = store
        self.files = files
        self.inventory = inventory
        self.rules = rules
        self.read = read
        self.clock = clock
        off = "GPU readings are off (c.E31.gpu_sample_s = 0)" if rules.sample_s <= 0 else None
        self.why_absent: str | None = off or "no reading taken yet"
        self.readings: dict[str, DeviceReading] = {}
        self.outside: dict[str, list[GpuProcess]] = {}  # device -> processes no job of the queue started
        self.busy: dict[str, str] = {}  # devices not to hand out: busy outside the queue, and why
        self._next = 0.0  # time.monotonic() of the next round
        self._reading = False  # a round is under way (NVML may hang on a GPU in a bad state)

    @property
    def on(self) -> bool:
        return self.rules.sample_s > 0 and bool(self.inventory)

    def due(self) -> bool:
        """Whether a round is due now (and, if so, the one after is set)."""
        if not self.on or self._reading or time.monotonic() < self._next:
            return False
        self._next = time.monotonic() + self.rules.sample_s
        return True

    def in_background(self, then: Callable[[], None]) -> None:
        """A round in a thread; ``then`` is called on this event loop if what may be handed out
        changed."""
        loop = asyncio.get_running_loop()
        self._reading = True

        def done(future: asyncio.Future) -> None:
            self._reading = False
            if future.exception() is not None:
                log.error("e31: reading the GPUs failed", exc_info=future.exception())
            elif future.result():
                then()

        loop.run_in_executor(None, self.round).add_done_callback(done)

    def round(self) -> bool:
        """Read the GPUs and act on it (in a thread: NVML and the store may take a moment).
        Returns whether what may be handed out changed: the queue should schedule again."""
        now = self.clock()
        running = [job for job in self.store.jobs((JobState.RUNNING,)) if job.granted and job.released_at is None]
        try:
            readings = self.read(self.inventory)
        except NvmlAbsent as absent:
            return self._absent(str(absent), running)
        self.why_absent = None
        self.readings = {r.device: r for r in readings}
        holders = {device: job.id for job in running for device in job.granted}
        self.outside = gpu_use.outside_processes(readings, holders)
        busy = gpu_use.busy_outside({d: p for d, p in self.outside.items() if d not in holders}, self.rules)
        changed, self.busy = busy != self.busy, busy
        for job in running:
            changed |= self._sample(job, now)
        return changed

    def _sample(self, job: JobRecord, now: float) -> bool:
        """Add a job's readings to its record; warn of idle GPUs, take back those to release.
        Whether it gave GPUs back."""
        assert job.started_at is not None  # running
        mine = [self.readings[d] for d in job.granted if d in self.readings]
        if not mine:
            return False
        taken = gpu_use.sample(job.gpu_use, mine, job.id, now, job.started_at, self.rules)
        fields: dict = {"gpu_use": taken.use, "used_gpu_s": taken.use["acc"]["used_gpu_s"]}
        if taken.give_back:
            fields["granted"] = [d for d in job.granted if d not in taken.give_back]
            fields["returned"] = [*job.returned, *({"device": d, "at": now} for d in taken.give_back)]
        if not self.store.update(job.id, running_since=job.started_at, **fields):
            return False  # it ended meanwhile
        if taken.warning:
            log.warning("e31: job %s: %s", job.id, taken.warning)
            self.files.jobdir(job.id).add_to_log(f"e31: warning: {taken.warning}")
        return bool(taken.give_back)

    def _absent(self, why: str, running: list[JobRecord]) -> bool:
        """No readings: each running job's record says why (unless it has figures already).
        Whether GPUs kept back as busy outside the queue are handed out again."""
        if self.why_absent != why:
            log.info("e31: no GPU readings: %s", why)
        self.why_absent = why
        changed, self.readings, self.outside, self.busy = bool(self.busy), {}, {}, {}
        for job in running:
            if job.gpu_use.get("why_absent") != why and not job.gpu_use.get("available"):
                self.store.update(job.id, running_since=job.started_at, gpu_use=gpu_use.absent(why))
        return changed

    def unread(self) -> str:
        """Why a job that held GPUs has no readings, when its record does not say."""
        if self.why_absent and self.why_absent != "no reading taken yet":
            return self.why_absent
        return f"it held its GPUs too briefly to be read (readings every {self.rules.sample_s:g} s)"
