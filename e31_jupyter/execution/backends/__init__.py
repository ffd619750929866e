"""Where a job runs. Two kinds of backend, each a ``typing.Protocol`` the type checker holds
them to:

``ProcessBackend`` (local, docker): e31's own scheduler (``service/scheduler.py``) decides when a
job starts and on which GPUs; the backend starts the worker as the job's account, with the job's
folder given to it and an environment from ``job_env``, and returns a JSON-able handle that the
store keeps, so a restarted server can ``adopt`` it. Stop, clean-up and recover touch only
processes of the job's account.

``ClusterBackend`` (slurm): the cluster's scheduler decides; ``service/cluster_scheduler.py`` hands
each job over at submit and follows what the cluster says (``BackendStatus``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from e31_jupyter.core.job import ContainerLimits, JobSpec, Request
from e31_jupyter.execution.accounts import Account
from e31_jupyter.execution.jobdir import JobDir


@dataclass
class BackendStatus:
    """What a cluster scheduler says of one job, in e31's words."""

    state: str  # queued | running | succeeded | failed | cancelled | expired
    reason: str = ""  # e.g. the scheduler's pending reason ("Resources", "Priority")
    position: int | None = None  # place among the cluster's pending jobs, 1 = next
    granted: list[str] = field(default_factory=list)  # the devices the job was given
    node: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    timed_out: bool = False  # the cluster ended it at its time limit: its verdict stands over the worker's

    def start_reason(self) -> str:
        gpus = f" with GPU(s) {', '.join(self.granted)}" if self.granted else ""
        return f"started by the cluster on {self.node or 'a node'}{gpus}"


class ProcessBackend(Protocol):
    """Runs each job's worker as a process (or a container) on this machine."""

    @property
    def starts_slowly(self) -> bool:
        """Whether ``start`` is called in a thread, off the server's event loop."""
        ...

    @property
    def container_limits(self) -> ContainerLimits | None:
        """The images, memory and CPUs a job may ask for; None: no containers."""
        ...

    def start(self, job_id: str, jobdir: JobDir, devices: list[str], account: Account) -> dict:
        """Launch the worker as ``account`` on ``devices``; its handle."""
        ...

    def adopt(self, job_id: str, handle: dict | None) -> bool:
        """Whether the job of ``handle`` still runs (after a restart)."""
        ...

    def recover(self, job_id: str, jobdir: JobDir, account: Account | None) -> dict | None:
        """The handle of a job's worker found by its id (the server died before recording it).
        Asked after a restart, once the jobs whose handle was recorded were adopted."""
        ...

    def wait(self, handle: dict) -> int | None:
        """Block until the job's process ends; its exit code (None when unknown)."""
        ...

    def stop(self, job_id: str, handle: dict, grace: float) -> None:
        """End the job: politely, then after ``grace`` seconds by force."""
        ...

    def suspend(self, job_id: str, handle: dict, grace: float, stop_grace: float) -> None:
        """Ask the job's worker to stop at its cell's end, saving a checkpoint (SIGUSR1); stop it
        (``stop`` with ``stop_grace``) if it has not ended after ``grace`` seconds."""
        ...

    def warn(self, job_id: str, handle: dict) -> None:
        """Tell the job's code that its time limit is near (SIGUSR2 to the worker, which passes it
        on: ``e31_jupyter.job.stopping()`` becomes true)."""
        ...

    def clean_up(self, job_id: str, account: Account | None) -> None:
        """End anything the job left behind once its worker is gone."""
        ...

    def check_default_image(self) -> None:
        """Say in the log what the default image lacks (a container backend); else nothing."""
        ...

    def close(self) -> None:
        """Let go of what the backend keeps between jobs, as the server stops (running jobs go on)."""
        ...


class ClusterBackend(Protocol):
    """A cluster whose own scheduler (Slurm) decides when and where each job runs."""

    @property
    def container_limits(self) -> ContainerLimits | None: ...

    def claim_shared_dir(self, data_dir: Path) -> Path | None:
        """Where job folders go so the nodes see them; None: in the data directory."""
        ...

    def submit(self, job_id: str, jobdir: JobDir, spec: JobSpec, after: list[dict], account: Account) -> dict:
        """Hand the job over; its handle. Raises E31Error with the cluster's message when refused."""
        ...

    def expected_start(self, spec: JobSpec) -> float | None:
        """When the cluster would start such a job now, queueing nothing."""
        ...

    def update(self, job_id: str, handle: dict, spec: JobSpec, before: Request, after: list[dict] | None) -> None:
        """Change a pending job's request at the cluster, or raise with its refusal."""
        ...

    def find(self, job_id: str, jobdir: JobDir) -> dict | None:
        """The handle of a job the cluster took while its server died before recording it."""
        ...

    def cancel(self, job_id: str, handle: dict) -> None: ...

    def suspend(self, job_id: str, handle: dict) -> None:
        """Ask the job's worker to stop at its cell's end, saving a checkpoint (SIGUSR1)."""
        ...

    def poll(self, handles: dict[str, dict]) -> dict[str, BackendStatus]:
        """What the cluster says of each job."""
        ...

    def pool(self) -> list[dict]:
        """The cluster's GPUs: ``[{"node", "device", "busy"}]``."""
        ...


CLUSTER_BACKENDS = ("slurm",)  # the backends that are schedulers themselves


def create(name: str, **settings) -> ProcessBackend | ClusterBackend:
    if name == "local":
        from e31_jupyter.execution.backends.local import LocalBackend

        return LocalBackend(**settings)
    if name == "docker":
        from e31_jupyter.execution.backends.docker import DockerBackend

        return DockerBackend(**settings)
    if name == "slurm":
        from e31_jupyter.execution.backends.slurm import SlurmBackend

        return SlurmBackend(**settings)
    raise ValueError(f"unknown backend {name!r}; available: local, docker, slurm")
