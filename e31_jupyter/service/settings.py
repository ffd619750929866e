"""What the server's configuration gives the queue: plain values, no traitlets."""

from __future__ import annotations

from dataclasses import dataclass, field

from e31_jupyter.core.gpu_use import WatchRules


@dataclass
class Settings:
    """The queue's limits and prices, as the server's configuration (``server/config.py``) sets them."""

    inventory: list[str] | None  # the GPUs e31 hands out; None: a cluster's scheduler decides
    default_max_runtime_s: float = 86400.0
    gpu_hour_rate: float = 0.0
    currency: str = "USD"
    grace_s: float = 5.0
    suspend_grace_s: float = 60.0  # how long a suspended job's running cell may take to end
    policy: str = "e31"
    long_jobs_share: float | None = None  # e31's share of the GPUs for long jobs; None: the policy's own
    max_queued_per_user: int = 1000
    max_gpus_per_user: int | None = None  # the most GPUs one user's jobs may hold at once; None: no cap
    max_input_bytes: int = 50 << 30
    max_output_bytes: int = 50 << 30
    delete_files_after_s: float | None = None  # an ended job's files are deleted this long after; None: kept
    system: bool = False  # the system scheduler of a shared machine (e31 serve --system), run as root
    many_users: bool = False  # callers are several people (the system scheduler, or a multi-user identity provider)
    jobs_run_as: str = "submitter"  # whose account a job runs as: its submitter's, or the server's
    job_env: list[str] = field(default_factory=list)  # c.E31.job_env: more variables for every job
    checkpoint_default: bool = False  # c.E31.checkpoint_default: a job's checkpoint when it does not say
    checkpoint_share: float = 0.05  # c.E31.checkpoint_share: what a checkpoint may cost of the run since the last
    gpu_watch: WatchRules = field(default_factory=WatchRules)  # c.E31.gpu_sample_s, idle_gpu_*, outside_gpu_memory_mib
