"""Where a job runs. Each backend has one small interface:

``start(job_id, jobdir, devices, account) -> handle`` launches the worker as ``account`` (an
``accounts.Account``, the one the queue resolved for the job: its submitter's or the server's),
with the job's folder given to it and an environment from ``job_env``, and returns a JSON-able
handle that the store keeps, so a restarted server can ``adopt(job_id, handle)`` it;
``wait(handle)`` blocks until the job's process has ended and returns its exit code (None when
unknown); ``stop(job_id, handle, grace)`` ends it (politely first); ``sweep(job_id, account)``
ends anything the job left behind; ``recover(job_id, account) -> handle | None`` (optional)
finds a job's worker by its id when the server died before recording the handle. Stop, sweep
and recover touch only processes of the job's account. A backend that runs jobs in containers also has
``container_limits`` (``job.ContainerLimits``): the images, memory and CPUs a job may ask for at
submit. ``starts_slowly = True`` asks the queue to call ``start`` in a thread, off the server's
event loop.

A backend that is itself a scheduler (Slurm) has ``schedules = True`` and another interface,
used by ``cluster_queue.ClusterQueue``: ``submit(job_id, jobdir, spec, after, account) -> handle`` (raising
E31Error with the scheduler's own message when it refuses the job), ``poll({job_id: handle})
-> {job_id: BackendStatus}``, ``cancel(job_id, handle)``, ``find(job_id, jobdir) -> handle | None``
(a job the cluster took while its server died before recording the handle), ``pool()`` (the
cluster's GPUs: ``[{"node", "device", "busy"}]``), ``expected_start(spec) -> float | None``
(when the cluster would start such a job now, queueing nothing; raising as ``submit`` would) and
``claim_shared_dir(data_dir)`` (where job directories go so the nodes see them; None: in the data
directory).
"""

from __future__ import annotations

from dataclasses import dataclass, field


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

    def start_reason(self) -> str:
        gpus = f" with GPU(s) {', '.join(self.granted)}" if self.granted else ""
        return f"started by the cluster on {self.node or 'a node'}{gpus}"


def create(name: str, **settings):
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
