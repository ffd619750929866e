"""The ``E31`` configuration section: ``c.E31.gpus = ["0", "1"]`` or ``--E31.gpus=0,1``."""

from __future__ import annotations

import ast
import os
import re

from jupyter_core.paths import jupyter_data_dir
from traitlets import Bool, Enum, Float, Int, List, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from e31_jupyter.client import SYSTEM_SOCKET  # noqa: F401 (where e31 serve --system listens)
from e31_jupyter.core.e31_policy import E31_LONG_SHARE
from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.core.job import parse_cpus, parse_duration, parse_memory
from e31_jupyter.core.policies import DEFAULT_POLICY, POLICIES
from e31_jupyter.execution.job_env import check_configured

GPU_ID = re.compile(r"\d+|GPU-[0-9A-Fa-f-]+|MIG-[0-9A-Za-z/-]+")  # an index, a UUID, a MIG device
SYSTEM_DATA_DIR = "/var/lib/e31"  # the system scheduler's, owned by root


class _DeviceList(List):
    """``--E31.gpus=GPU-…`` reaches E31 as a string the server read before it knew E31. traitlets
    would read it as a Python literal, and a UUID, which is none, as no setting at all (every GPU):
    keep the text instead, for ``_split_device_lists``."""

    def from_string(self, s: str) -> list[str]:
        return [s]


class E31(Configurable):
    gpus = _DeviceList(
        Unicode(),
        default_value=None,
        allow_none=True,
        help="GPUs the queue may hand out: device indices, GPU-... UUIDs (stable across reboots) or "
        "MIG-... ids; a job's CUDA_VISIBLE_DEVICES names them the same way. Default: every GPU NVML "
        "reports (its MIG instances where MIG is on), none without an NVIDIA driver. A subset gives "
        "the queue part of a machine.",
    ).tag(config=True)

    data_dir = Unicode(
        help="Where the queue keeps its SQLite store and job directories. Servers that share it "
        "share one queue. Default: e31/ under the Jupyter data directory."
    ).tag(config=True)

    backend = Enum(
        ["local", "docker", "slurm"],
        default_value="local",
        help="Where jobs run: 'local' (a process on this machine), 'docker' (a container on "
        "the engine that DOCKER_HOST, or the default socket, names) or 'slurm' (a batch job on "
        "the Slurm cluster that this machine's sbatch reaches; Slurm then decides what runs).",
    ).tag(config=True)

    slurm_partition = Unicode(
        help="The Slurm partition (or comma-separated partitions) jobs go to. Default: the cluster's default partition."
    ).tag(config=True)

    slurm_account = Unicode(help="The Slurm account jobs are charged to (sbatch --account).").tag(config=True)

    slurm_qos = Unicode(help="The Slurm QOS of jobs (sbatch --qos).").tag(config=True)

    slurm_extra_args = List(
        Unicode(), help="More sbatch arguments for every job, e.g. ['--constraint=a100', '--mem=64G']."
    ).tag(config=True)

    slurm_shared_dir = Unicode(
        help="A folder on a filesystem the Slurm nodes share, for the job directories (and the "
        "inbox of captured values); the SQLite store stays in data_dir. Default: data_dir itself, "
        "which must then be on the shared filesystem. One folder per data directory."
    ).tag(config=True)

    slurm_python = Unicode(
        help="The Python that runs the e31 worker on the nodes (it needs e31-jupyter, papermill "
        "and the notebooks' kernels). Default: this server's Python, which suits an environment "
        "on the shared filesystem."
    ).tag(config=True)

    slurm_setup = Unicode(
        help="Shell lines the batch script runs on the node before the worker, e.g. "
        "'module load cuda/12' or 'source /shared/envs/ml/bin/activate'."
    ).tag(config=True)

    docker_image = Unicode(
        help="The image a job runs in when it names none (backend 'docker'). It must contain "
        "Python 3.10+ (as `docker_python`) with papermill, ipykernel and nbconvert."
    ).tag(config=True)

    docker_allowed_images = List(Unicode(), help="Images a job may name besides docker_image (backend 'docker').").tag(
        config=True
    )

    docker_mounts = List(
        Unicode(),
        help="Host folders mounted read-only into every job's container: 'HOST' (at the same "
        "path) or 'HOST:CONTAINER'. By default a container sees only its job's directory.",
    ).tag(config=True)

    docker_network = Unicode(
        "none", help="The network of job containers: 'none' (no network at all), 'host', or a Docker network's name."
    ).tag(config=True)

    docker_memory = Unicode(
        help="A job container's memory limit (e.g. 16g), and the most a job may ask for. Default: no limit."
    ).tag(config=True)

    docker_cpus = Float(
        0.0, help="A job container's CPU limit (e.g. 8 or 0.5), and the most a job may ask for. Default (0): no limit."
    ).tag(config=True)

    docker_user = Unicode(
        help="The user every job container runs as: 'UID' or 'UID:GID'. Default: the account "
        "the job runs as (c.E31.jobs_run_as: its submitter's, or the server's). A root server "
        "hands each job's directory to that user before the job starts."
    ).tag(config=True)

    docker_python = Unicode("python3", help="The Python command in job images that runs the e31 worker.").tag(
        config=True
    )

    policy = Enum(
        list(POLICIES),
        default_value=DEFAULT_POLICY,
        help="The scheduling policy: e31 (deadline-aware fair share, the default), e31-preempt (e31 "
        "that may suspend jobs: c.E31.preempt), edf, backfill (as Slurm does it), sjf or fifo. See "
        "e31_jupyter/core/policies.py.",
    ).tag(config=True)

    long_jobs_share = Float(
        E31_LONG_SHARE,
        help="With the e31 policy: the most of the GPUs, and of the machines, that jobs expected to "
        "run over a day may hold while their deadline lets them wait and short jobs keep coming "
        "(0-1), so the rest turn over within a day for work that comes later; while none runs, one may start "
        "whatever its size, and while no short job came for a day, any may. 1: no limit.",
    ).tag(config=True)

    default_max_runtime = Unicode("24h", help="The run time limit of a job that declares none (e.g. 90m, 6h, 1d).").tag(
        config=True
    )

    delete_files_after = Unicode(
        "",
        help="Delete the files of jobs that ended this long ago (e.g. 30d, 12h): their notebooks, "
        "data, values, outputs and logs, as `e31 delete` does. Their records, history and "
        "GPU-hours stay. Default: never; the files stay until someone deletes them.",
    ).tag(config=True)

    gpu_hour_rate = Float(0.0, help="What one GPU-hour costs, in `currency`.").tag(config=True)

    currency = Unicode("USD", help="The currency of gpu_hour_rate.").tag(config=True)

    admin_users = List(Unicode(), help="Users who see and cancel every job, not only their own.").tag(config=True)

    admin_group = Unicode(
        help="A Unix group whose members are admins too (see and cancel every job). Meant for "
        "the system scheduler (e31 serve --system), where it is read from the system's own "
        "group database, not from anything a user configures."
    ).tag(config=True)

    system = Bool(
        False,
        help="Run as the system scheduler of a shared machine (set by `e31 serve --system`): "
        "root owns the data directory and the store, callers are named by the kernel from the "
        "Unix socket they connect to, and each job runs as the user who submitted it.",
    ).tag(config=True)

    scheduler_socket = Unicode(
        help="The Unix socket of the machine's system scheduler (e.g. /run/e31/e31.sock). Set, "
        "this server keeps no queue of its own: it forwards the e31 API to that scheduler, which "
        "knows the caller as this server's Unix user, and hands over the notebooks and data a "
        "submit names, read with this user's permissions."
    ).tag(config=True)

    stop_grace = Float(5.0, help="Seconds between SIGTERM and SIGKILL when a job is cancelled or times out.").tag(
        config=True
    )
    suspend_grace = Float(
        60.0,
        help="Seconds a suspended job's running cell may take to end (e31 suspend): it then saves a "
        "checkpoint and gives its GPUs back. A cell that takes longer is stopped, and the job's last "
        "checkpoint stands.",
    ).tag(config=True)

    gpu_sample_s = Float(
        5.0,
        help="Seconds between readings of the GPUs (NVML): utilisation, memory and power of each "
        "running job's GPUs, and processes outside the queue. 0 takes none.",
    ).tag(config=True)

    idle_gpu_threshold = Float(
        5.0, help="A granted GPU under this SM utilisation (%) is idle (see idle_gpu_after)."
    ).tag(config=True)

    idle_gpu_after = Unicode(
        "30m",
        help="How long a granted GPU may stay idle before its job is warned (in its log, widget "
        "and the panel), e.g. 30m, 1h.",
    ).tag(config=True)

    idle_gpu_action = Enum(
        ["warn", "release"],
        default_value="warn",
        help="What happens to a job's idle GPUs: 'warn' only, or 'release': also give back those "
        "the job's processes hold no memory on. The meter stops counting them.",
    ).tag(config=True)

    outside_gpu_memory_mib = Int(
        0,
        help="A GPU that processes outside the queue (someone's own kernel) hold more memory on "
        "than this (MiB) is busy outside the queue: it is not handed out until they end.",
    ).tag(config=True)

    max_queued_per_user = Int(1000, help="The most jobs one user may have waiting in the queue at once.").tag(
        config=True
    )

    max_gpus_per_user = Int(
        0,
        help="The most GPUs one user's jobs may hold at once (as Slurm's MaxTRESPerUser): a job "
        "that would take its owner past it waits, whatever the policy, while others' jobs use "
        "the GPUs; one asking for more is refused. 0: no limit. Local and docker backends; with "
        "Slurm, set the limit in Slurm.",
    ).tag(config=True)

    max_input_bytes = Int(50 << 30, help="The most data (files, folders, captured values) one job may bring in.").tag(
        config=True
    )

    max_output_bytes = Int(
        50 << 30,
        help="The most one job may hand back in collected files; past it the job keeps what fits "
        "and says what was left out.",
    ).tag(config=True)

    @default("data_dir")
    def _default_data_dir(self):
        return SYSTEM_DATA_DIR if self.system else os.path.join(jupyter_data_dir(), "e31")

    @validate("gpus")
    def _split_device_lists(self, proposal):
        if proposal["value"] is None:
            return None
        devices = [device for item in proposal["value"] for device in _device_ids(str(item))]
        for device in devices:
            if not GPU_ID.fullmatch(device):
                raise ValueError(
                    f"c.E31.gpus: {device!r} is not a GPU id. Give device indices, GPU-... UUIDs or MIG-... ids: "
                    '--E31.gpus=0,1, --E31.gpus=\'["0", "1"]\' or c.E31.gpus = ["0", "1"].'
                )
        return devices

    def backend_settings(self) -> dict:
        """The keyword arguments of ``backends.create`` for the configured backend."""
        if self.backend == "slurm":
            return {
                "partition": self.slurm_partition,
                "account": self.slurm_account,
                "qos": self.slurm_qos,
                "extra_args": list(self.slurm_extra_args),
                "shared_dir": self.slurm_shared_dir,
                "python": self.slurm_python,
                "setup": self.slurm_setup,
            }
        if self.backend != "docker":
            return {"job_env": list(self.job_env), "standby": self.standby_worker}
        memory = self.docker_memory
        return {
            "job_env": list(self.job_env),
            "image": self.docker_image,
            "allowed_images": list(self.docker_allowed_images),
            "mounts": list(self.docker_mounts),
            "network": self.docker_network,
            "memory_bytes": parse_memory(memory, "c.E31.docker_memory") if memory else None,
            "cpus": self.docker_cpus or None,
            "user": self.docker_user,
            "python": self.docker_python,
        }

    @validate("docker_allowed_images")
    def _split_images(self, proposal):
        return _split_items(proposal["value"])

    @validate("docker_mounts")
    def _check_mounts(self, proposal):
        mounts = _split_items(proposal["value"])
        for mount in mounts:
            if not all(part.startswith("/") for part in mount.split(":", 1)):
                raise ValueError(
                    f"c.E31.docker_mounts: {mount!r} must be an absolute host path, optionally "
                    "followed by :CONTAINER_PATH (also absolute)."
                )
        return mounts

    @validate("docker_memory", "docker_cpus")
    def _check_container_limit(self, proposal):
        name, value = proposal["trait"].name, proposal["value"]
        parse = parse_memory if name == "docker_memory" else parse_cpus
        if value:
            try:
                parse(value, f"c.E31.{name}")
            except InvalidRequest as error:
                raise ValueError(str(error)) from None
        return value

    @validate("docker_user")
    def _check_user(self, proposal):
        if proposal["value"] and not re.fullmatch(r"\d+(:\d+)?", proposal["value"]):
            raise ValueError(f"c.E31.docker_user must be UID or UID:GID, got {proposal['value']!r}.")
        return proposal["value"]

    @validate("default_max_runtime", "delete_files_after")
    def _check_duration(self, proposal):
        name = proposal["trait"].name
        if name == "delete_files_after" and not proposal["value"]:
            return proposal["value"]  # never
        try:
            parse_duration(proposal["value"], f"c.E31.{name}")
        except InvalidRequest as error:
            raise ValueError(str(error)) from None
        return proposal["value"]

    @validate("long_jobs_share")
    def _check_share(self, proposal):
        if not 0 <= proposal["value"] <= 1:
            raise ValueError(
                f"c.E31.long_jobs_share is {proposal['value']:g}, but it is a share of the GPUs, from 0 to 1 "
                f"(1: no limit on long jobs). Set it between them, e.g. --E31.long_jobs_share={E31_LONG_SHARE:g}."
            )
        return proposal["value"]

    @validate("max_gpus_per_user")
    def _check_gpus_per_user(self, proposal):
        if proposal["value"] < 0:
            raise ValueError(
                f"c.E31.max_gpus_per_user is {proposal['value']}: give the most GPUs one user's jobs may hold "
                "at once, or 0 for no limit."
            )
        return proposal["value"]

    @validate("gpu_sample_s", "outside_gpu_memory_mib")
    def _check_not_negative(self, proposal):
        if proposal["value"] < 0:
            raise ValueError(f"c.E31.{proposal['trait'].name} must be 0 or more.")
        return proposal["value"]

    @validate("idle_gpu_threshold")
    def _check_threshold(self, proposal):
        if not 0 <= proposal["value"] <= 100:
            raise ValueError("c.E31.idle_gpu_threshold is a utilisation in %: give a number from 0 to 100.")
        return proposal["value"]

    @validate("gpu_hour_rate")
    def _check_rate(self, proposal):
        if proposal["value"] < 0:
            raise ValueError("c.E31.gpu_hour_rate must be 0 or more.")
        return proposal["value"]

    jobs_run_as = Enum(
        ["submitter", "server"],
        default_value="submitter",
        help="Whose Unix account a job runs as. 'submitter' (the default): a scheduler run as root "
        "starts each job as the user who submitted it (uid, gid and groups), in a folder only that "
        "user can open; a job whose owner has no Unix account here fails at start saying so. A "
        "server not run as root can start no other user's processes: its jobs run as itself. 'server': every "
        "job runs as the server's own account, as a single-user server does; on a server that "
        "several users reach, this gives no isolation between them: their jobs can read and "
        "change each other's files.",
    ).tag(config=True)

    job_env = List(
        Unicode(),
        help="More environment variables for every job: a NAME (its value from the server's "
        "environment) or NAME=VALUE. A job otherwise gets only an allowlist (PATH, locale, "
        "thread counts, the Python environment; see e31_jupyter/execution/job_env.py), never the server's "
        "tokens. Names that look like credentials (TOKEN, SECRET, PASSWORD, JPY_*, E31_*) are "
        "refused: a job runs its submitter's code.",
    ).tag(config=True)

    @validate("job_env")
    def _check_job_env(self, proposal):
        return check_configured(proposal["value"])

    preempt = Bool(
        False,
        help="With the e31 policy: let the queue suspend running jobs that take checkpoints "
        "(--checkpoint) to start a job that would otherwise miss its deadline, when they can "
        "afford it (each still meets its own deadline) and what they lose since their last "
        "checkpoint costs less than the job saved. A job so suspended goes back in line at once "
        "and goes on from its checkpoint; its history names the job it made room for. Off by default.",
    ).tag(config=True)

    checkpoint_default = Bool(
        False,
        help="Whether a notebook job that does not say (--checkpoint / --no-checkpoint) saves its "
        "kernel's variables at cell ends, so that it can be resumed from its last finished cell "
        "(e31 resume) after it ran out of time, failed or was lost. A save is taken when it costs "
        "under c.E31.checkpoint_share of the run time since the last one.",
    ).tag(config=True)

    checkpoint_share = Float(
        0.05,
        help="A job with --checkpoint saves its kernel after a cell when the save is expected to cost "
        "at most this share of the run time since its last one (0.05: 5%), or under 20 ms (a small "
        "namespace is saved after every cell). The cost is learnt from the job's own saves.",
    ).tag(config=True)

    @validate("checkpoint_share")
    def _check_checkpoint_share(self, proposal):
        if not 0 < proposal["value"] <= 1:
            raise TraitError(f"c.E31.checkpoint_share must be above 0 and at most 1; got {proposal['value']}.")
        return proposal["value"]

    standby_worker = Bool(
        True,
        help="Keep one job worker started ahead, with papermill and nbconvert already imported, "
        "for the next job of the local backend that runs as the server's own account: it starts "
        "about half a second sooner. The standby serves one job and ends with it; the next one "
        "is started as it is taken, so it costs one idle process (about 100 MB) and its imports "
        "once per job. The first job after a server starts starts the first standby.",
    ).tag(config=True)


def _device_ids(item: str) -> list[str]:
    """One configured item as device ids: --E31.gpus=0,1 arrives as "0,1", and the list form
    --E31.gpus='["0", "1"]' as the text of a list."""
    text = item.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            listed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise ValueError(
                f'c.E31.gpus: cannot read {text!r} as a list; write it as \'["0", "1"]\' or 0,1.'
            ) from None
        return [str(device).strip() for device in listed if str(device).strip()]
    return [device.strip() for device in text.split(",") if device.strip()]


def _split_items(values: list[str]) -> list[str]:
    """--E31.docker_mounts=/data,/models on the command line arrives as one item: split it."""
    return [part.strip() for item in values for part in item.split(",") if part.strip()]
