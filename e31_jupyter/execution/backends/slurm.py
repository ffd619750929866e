"""Jobs on a Slurm cluster, through Slurm's own commands (sbatch, squeue, sacct, scancel).

Slurm schedules: this backend is a ``ClusterBackend`` and ``cluster_scheduler.ClusterScheduler``
follows it; e31's policy and GPU inventory are not used. A job is handed over at submit as a
batch script in its directory that runs the same worker as the local backend,
``python -m e31_jupyter.execution.worker JOBDIR``, so progress, the executed notebook, the collected files
and the manifest are the same. The job directory must be on a filesystem the nodes share.

Everything e31 shows of a job comes from Slurm: its state and pending reason, its place in
line, its node and GPUs, and the start and end times the meter multiplies by the GPU count.

- ``submit``: ``sbatch --parsable``, with the e31 job in the comment and the batch script in
  the job's directory, so ``find`` can still tell which Slurm job it is when a server died
  between sbatch and recording its answer.
- ``poll``: one ``squeue --json`` (Slurm 22.05 lists every job it still knows and ignores
  filters); jobs it no longer lists come from ``sacct`` (``sacct -c``, the job completion file,
  on clusters without an accounting database).
- ``cancel``: ``scancel``; ``pool``: ``sinfo --json`` with the GPUs running jobs hold.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from e31_jupyter.core.errors import Conflict, E31Error, InvalidRequest
from e31_jupyter.core.job import JobSpec, Request
from e31_jupyter.core.states import JobState
from e31_jupyter.core.text import format_seconds
from e31_jupyter.execution import accounts
from e31_jupyter.execution.accounts import Account
from e31_jupyter.execution.backends import BackendStatus
from e31_jupyter.execution.job_env import job_environment
from e31_jupyter.execution.jobdir import JobDir

COMMAND_TIMEOUT_S = 60
SCRIPT = "slurm.sh"  # in the job's directory
ALLOCATION = "slurm-allocation.json"  # what the batch script saw: node and GPUs
OWNER_FILE = "e31-data-dir"  # in slurm_shared_dir: the data directory whose jobs it holds
NO_JOB_DIR_EXIT = 97  # the batch script's exit code when the node cannot see the job's directory
NOT_PENDING = "no longer pending"  # scontrol's words for a job that has started meanwhile

QUEUED_STATES = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}
RUNNING_STATES = {
    "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING",
}  # fmt: skip
NOT_STARTED_NODES = {"", "(null)", "None assigned"}
PENDING_REASONS = {  # Slurm's reason, and what it means for the user
    "Resources": "the GPUs (or other resources) it asked for are in use",
    "Priority": "jobs of higher priority go first",
    "JobHeldUser": "held by its owner (scontrol hold)",
    "JobHeldAdmin": "held by an administrator",
    "BeginTime": "its start time has not come",
    "Dependency": "waiting for the jobs it runs after",
    "ReqNodeNotAvail": "the nodes it needs are unavailable",
    "PartitionDown": "the partition is down",
}
ENDED = {  # Slurm's end states that say it all, in e31's words
    "COMPLETED": (JobState.SUCCEEDED, ""),
    "CANCELLED": (JobState.CANCELLED, "cancelled in Slurm (scancel)"),
    "DEADLINE": (JobState.EXPIRED, "deadline: Slurm found that the job could not end before its deadline"),
    "OUT_OF_MEMORY": (JobState.FAILED, "out of memory: the job used more memory than Slurm allows it"),
    "PREEMPTED": (JobState.FAILED, "preempted: Slurm stopped the job for another one"),
    "BOOT_FAIL": (JobState.FAILED, "the node Slurm picked failed to boot"),
}
UNUSABLE_NODE_STATES = {"down", "drained", "draining", "fail", "failing", "future", "unknown", "maint"}

BATCH_SCRIPT = """\
#!/bin/bash
# e31 job {job_id}: the e31 worker, on the node Slurm picked.
if [ ! -d {jobdir} ]; then
    echo "e31: $(hostname) cannot see {jobdir}; job directories must be on a filesystem the nodes share" >&2
    exit {no_job_dir}
fi
printf '{{"node": "%s", "gpus": "%s"}}\\n' "${{SLURMD_NODENAME:-}}" "${{SLURM_JOB_GPUS:-}}" > {allocation}
if [ -z "${{SLURM_JOB_GPUS:-}}" ]; then
    export CUDA_VISIBLE_DEVICES="" NVIDIA_VISIBLE_DEVICES=void  # no GPUs: see none
else
    export NVIDIA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"
fi
export E31_JOB_ID={job_id}
{setup}
cd {work}
exec {python} -m e31_jupyter.execution.worker {jobdir}
"""


@dataclass
class SlurmJob:
    """One job as Slurm describes it (squeue or sacct), in plain fields."""

    slurm_id: str
    state: str  # Slurm's base state: PENDING, RUNNING, COMPLETED, TIMEOUT, ...
    reason: str = ""
    node: str = ""  # "" until it has been given a node
    gpus: list[str] | None = None  # the GPU indices Slurm allocated; None when it does not say
    start: float | None = None
    end: float | None = None
    time_limit_s: float | None = None
    exit_code: int | None = None
    priority: int = 0
    submitted: float = 0.0
    partitions: frozenset[str] = field(default_factory=frozenset)
    workdir: str = ""  # where it runs: for e31's jobs, the job's work/ folder

    @property
    def started(self) -> bool:
        return self.node not in NOT_STARTED_NODES and self.start is not None


class SlurmBackend:
    container_limits = None

    def __init__(
        self,
        partition: str = "",
        account: str = "",
        qos: str = "",
        extra_args: Sequence[str] = (),
        shared_dir: str = "",
        python: str = "",
        setup: str = "",
    ):
        self.partition = partition
        self.account = account
        self.qos = qos
        self.extra_args = list(extra_args)
        self.shared_dir = Path(shared_dir) if shared_dir else None
        self.python = python or sys.executable
        self.setup = setup
        self._completion_file: bool | None = None  # sacct -c? (known after the first look)

    # --- the scheduler-backend interface --------------------------------------------------------

    def claim_shared_dir(self, data_dir: Path) -> Path | None:
        """The shared folder for this data directory's jobs (None: the data directory itself).
        One folder serves one data directory: two queues in it would each take the other's job
        directories for failed submits."""
        if self.shared_dir is None:
            return None
        owner_file = self.shared_dir / OWNER_FILE
        owner = str(Path(data_dir).resolve())
        try:
            self.shared_dir.mkdir(parents=True, exist_ok=True)
            claimed = owner_file.read_text().strip() if owner_file.exists() else ""
            if not claimed:
                owner_file.write_text(owner + "\n")
        except OSError as error:
            raise E31Error(f"c.E31.slurm_shared_dir {str(self.shared_dir)!r} is not usable: {error}", 500) from None
        if claimed and claimed != owner:
            raise E31Error(
                f"c.E31.slurm_shared_dir {str(self.shared_dir)!r} holds the jobs of the data directory "
                f"{claimed!r}; give each data directory its own shared folder (one per user, say).", 500,
            )  # fmt: skip
        return self.shared_dir

    def submit(
        self, job_id: str, jobdir: JobDir, spec: JobSpec, after: Sequence[dict] = (), account: Account | None = None
    ) -> dict:
        """``sbatch``: Slurm's message (a bad partition, say) becomes the user's error. ``after``:
        handles of jobs that must succeed first (``--dependency=afterok``). ``account``: who the
        job runs as; a root server submits for that user (``--uid``), who gets the job's folder;
        a user's own server submits as its user."""
        script = jobdir.path.resolve() / SCRIPT
        script.write_text(self.batch_script(job_id, jobdir))
        script.chmod(0o755)
        waits = [f"--dependency={dependency(after)}"] if after else []
        if account is not None:
            accounts.give_folder(jobdir.path, account.uid, account.gid)
        env = job_environment(account or accounts.current(), job_id, {}, server=accounts.current())
        exports = [f"--export={','.join(sorted(env))}"]  # these alone (and Slurm's own): no secret of the server's
        args = [*self.sbatch_args(job_id, jobdir, spec), *_submit_as(account), *exports, *waits]
        output = self._run(["sbatch", *args, str(script)], refused=True, env=env)
        slurm_id = output.strip().split(";")[0]  # "ID" or "ID;CLUSTER"
        return {"slurm_id": slurm_id, "jobdir": str(jobdir.path.resolve())}

    def expected_start(self, spec: JobSpec) -> float | None:
        """``sbatch --test-only``: Slurm's refusal, as a submit would get it, or when Slurm
        expects to start such a job now (None when it does not say). Nothing is queued."""
        nowhere = JobDir(Path("/nonexistent/e31-check"))  # Slurm does not look at the paths here
        args = ["sbatch", "--test-only", *self.sbatch_args("check", nowhere, spec), "--wrap", "true"]
        result = self._run(args, refused=True, env={"SLURM_TIME_FORMAT": "%s"}, stderr=True)
        start = re.search(r"to start at (\d+)", result)
        return float(start.group(1)) if start else None

    def update(
        self, job_id: str, handle: dict, spec: JobSpec, before: Request, after: list[dict] | None = None
    ) -> None:
        """Change a pending job in place (``scontrol update``) to ask for ``spec``'s request and
        name, and, where ``after`` is given, to run after those jobs' handles (none: after no
        job). The new request is checked first as a submit's is (``sbatch --test-only``):
        scontrol applies its fields one by one, and accepts some that a submit is refused for
        (more GPUs than any node has), so on its own it could leave the job half changed, or
        never able to start."""
        fields = update_fields(spec.request, before, spec.name, after=after)
        self.expected_start(spec)
        try:
            self._run(["scontrol", "update", f"JobId={handle['slurm_id']}", *fields], refused=True)
        except E31Error as error:
            if NOT_PENDING not in error.message:
                raise
            raise Conflict(
                f"Job {job_id} has just started in Slurm; only a queued job's request can change. "
                "To run it again with another request: e31 resubmit."
            ) from None

    def find(self, job_id: str, jobdir: JobDir) -> dict | None:
        """The handle of the Slurm job that runs this job's batch script, if Slurm has one."""
        script = str(jobdir.path.resolve() / SCRIPT)
        for job in json.loads(self._run(["squeue", "--json"]))["jobs"]:
            if job.get("command") == script:
                return {"slurm_id": str(job["job_id"]), "jobdir": str(jobdir.path.resolve())}
        return None

    def cancel(self, job_id: str, handle: dict) -> None:
        self._run(["scancel", handle["slurm_id"]])

    def suspend(self, job_id: str, handle: dict) -> None:
        """SIGUSR1 to the worker (the batch script ``exec``s it): it stops at its cell's end."""
        self._run(["scancel", "--batch", "--signal=USR1", handle["slurm_id"]])

    def poll(self, handles: dict[str, dict]) -> dict[str, BackendStatus]:
        """What Slurm says of each job; jobs it has forgotten entirely are left out (or, when
        their worker left a manifest, described by it)."""
        listed = {job.slurm_id: job for job in self._squeue()}
        known = {job_id: _same_job(listed.get(handle["slurm_id"]), handle) for job_id, handle in handles.items()}
        missing = [handles[job_id]["slurm_id"] for job_id, job in known.items() if job is None]
        ended = {job.slurm_id: job for job in self._sacct(missing)} if missing else {}
        statuses = {}
        for job_id, handle in handles.items():
            job = known[job_id] or _same_job(ended.get(handle["slurm_id"]), handle)
            jobdir = JobDir(handle["jobdir"])
            if job is not None:
                statuses[job_id] = to_status(job, queue_position(job, listed.values()), jobdir)
            elif (forgotten := status_from_manifest(jobdir)) is not None:
                statuses[job_id] = forgotten
        return statuses

    def pool(self) -> list[dict]:
        """The GPUs of the partition's nodes; busy when a running job holds them (or the node is
        down or drained)."""
        nodes = json.loads(self._run(["sinfo", "--json"]))["nodes"]
        held: dict[str, set[str]] = {}
        for job in self._squeue():
            if job.state in RUNNING_STATES and job.gpus:
                held.setdefault(job.node, set()).update(job.gpus)
        wanted = set(_split(self.partition))
        pool = []
        for node in nodes:
            if wanted and not wanted & set(node.get("partitions") or []):
                continue
            usable = _node_usable(node)
            for device in range(gpu_count(node.get("gres", ""))):
                busy = not usable or str(device) in held.get(node["name"], ())
                pool.append({"node": node["name"], "device": str(device), "busy": busy})
        return pool

    # --- what is handed to Slurm ----------------------------------------------------------------

    def batch_script(self, job_id: str, jobdir: JobDir) -> str:
        path = jobdir.path.resolve()
        return BATCH_SCRIPT.format(
            job_id=job_id, jobdir=shlex.quote(str(path)), work=shlex.quote(str(path / "work")),
            allocation=shlex.quote(str(path / ALLOCATION)), python=shlex.quote(self.python),
            setup=self.setup, no_job_dir=NO_JOB_DIR_EXIT,
        )  # fmt: skip

    def sbatch_args(self, job_id: str, jobdir: JobDir, spec: JobSpec) -> list[str]:
        request = spec.request
        args = [
            "--parsable", "--no-requeue", "--nodes=1", "--ntasks=1",
            f"--job-name={spec.name}", f"--comment=e31 job {job_id}", f"--chdir={jobdir.path.resolve() / 'work'}",
            f"--output={jobdir.path.resolve() / 'job.log'}", "--open-mode=append",
            f"--time={slurm_duration(request.max_runtime_s)}",
        ]  # fmt: skip
        if request.gpus:
            args.append(f"--gres=gpu:{request.gpus}")
        if request.deadline is not None:
            deadline, least = deadline_limits(request.deadline, request.runtime_estimate(), request.max_runtime_s)
            args += [f"--deadline={deadline}"] + ([f"--time-min={least}"] if least else [])
        for option, value in (("partition", self.partition), ("account", self.account), ("qos", self.qos)):
            if value:
                args.append(f"--{option}={value}")
        return args + self.extra_args

    # --- asking Slurm ---------------------------------------------------------------------------

    def _squeue(self) -> list[SlurmJob]:
        return [from_squeue(job) for job in json.loads(self._run(["squeue", "--json"]))["jobs"]]

    def _sacct(self, slurm_ids: list[str]) -> list[SlurmJob]:
        fields = "JobIDRaw,State,Start,End,NodeList,ExitCode,Timelimit,Partition,WorkDir"
        command = ["sacct", "--allocations", "--noheader", "--parsable2", f"--format={fields}"]
        if self._uses_completion_file():
            command.append("--completion")
        output = self._run([*command, f"--jobs={','.join(slurm_ids)}"], env={"SLURM_TIME_FORMAT": "%s"})
        return [from_sacct(line.split("|")) for line in output.splitlines() if line.strip()]

    def _uses_completion_file(self) -> bool:
        """No accounting database but a job completion file: ``sacct -c`` reads that."""
        if self._completion_file is None:
            config = self._run(["scontrol", "show", "config"])
            settings = dict(re.findall(r"^(\w+)\s+=\s+(\S*)", config, re.MULTILINE))
            self._completion_file = settings.get("AccountingStorageType") == "accounting_storage/none" and (
                settings.get("JobCompType") == "jobcomp/filetxt"
            )  # fmt: skip
        return self._completion_file

    def _run(self, command: list[str], refused: bool = False, env: dict | None = None, stderr: bool = False) -> str:
        """Run a Slurm command; its own message becomes the error. ``refused``: Slurm turned the
        request down (400), rather than being unreachable (503). ``stderr``: what it said there
        is the answer (``--test-only`` answers there)."""
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False,
                env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as error:
            raise E31Error(f"Could not run {command[0]} to reach Slurm: {error}", status=503) from None
        if result.returncode == 0:
            return result.stderr if stderr else result.stdout
        message = _slurm_message(result.stderr or result.stdout) or f"exit code {result.returncode}"
        if refused:
            raise E31Error(f"Slurm refused the job: {message}", status=400)
        raise E31Error(f"{command[0]}: {message}", status=503)


def _submit_as(account: Account | None) -> list[str]:
    """sbatch's arguments that make root's submit another user's job (Slurm lets only root)."""
    if account is None or os.geteuid() != 0 or account.is_root:
        return []
    return [f"--uid={account.uid}", f"--gid={account.gid}"]


# --- Slurm's words -> e31's ---------------------------------------------------------------------


def to_status(job: SlurmJob, position: int | None, jobdir: JobDir) -> BackendStatus:
    started = job.started and job.state not in QUEUED_STATES
    granted = job.gpus if job.gpus else (_allocated_gpus(jobdir) if started else [])
    status = BackendStatus(
        state=JobState.QUEUED, node=job.node if started else None, granted=granted if started else [],
        started_at=job.start if started else None,
    )  # fmt: skip
    if job.state in QUEUED_STATES:
        status.reason, status.position = pending_reason(job.reason), position
    elif job.state in RUNNING_STATES:
        status.state = JobState.RUNNING
    else:
        status.state, status.reason = final_state(job)
        status.timed_out = job.state == "TIMEOUT"
        status.finished_at = job.end if job.end is not None else time.time()
    return status


def pending_reason(reason: str) -> str:
    """Slurm's own reason word (Resources, Priority, ...), with what it means."""
    if reason in ("", "None"):  # not yet looked at by Slurm's scheduler
        return "pending in Slurm"
    meaning = PENDING_REASONS.get(reason)
    return f"pending in Slurm: {reason}" + (f" ({meaning})" if meaning else "")


def final_state(job: SlurmJob) -> tuple[JobState, str]:
    """e31's state and reason for a job that Slurm says has ended."""
    if job.state == "TIMEOUT":
        limit = f" (Slurm's limit: {format_seconds(job.time_limit_s)})" if job.time_limit_s else ""
        return JobState.FAILED, f"timeout: ran longer than max_runtime{limit}"
    if job.state == "NODE_FAIL":
        return JobState.FAILED, f"node failure: Slurm lost the node {job.node}".rstrip()
    if job.state in ENDED:
        return ENDED[job.state]
    if job.exit_code == NO_JOB_DIR_EXIT:
        return JobState.FAILED, (
            f"{job.node or 'the node'} cannot see the job's directory: job directories must be on a "
            "filesystem the nodes share (c.E31.slurm_shared_dir)"
        )  # fmt: skip
    code = f" with exit code {job.exit_code}" if job.exit_code else ""
    return JobState.FAILED, f"failed in Slurm ({job.state.lower()}{code}); see the job's log"


def queue_position(job: SlurmJob, everyone: Iterable[SlurmJob]) -> int | None:
    """Place in line among the pending jobs that share a partition with it, in the order Slurm
    would start them: priority, then submit time. Held jobs (priority 0) have none."""
    if job.state != "PENDING" or job.priority <= 0:
        return None
    key = (-job.priority, job.submitted, int(job.slurm_id))
    ahead = sum(
        1 for other in everyone
        if other.state == "PENDING" and other.priority > 0 and other.partitions & job.partitions
        and (-other.priority, other.submitted, int(other.slurm_id)) < key
    )  # fmt: skip
    return ahead + 1


def status_from_manifest(jobdir: JobDir) -> BackendStatus | None:
    """A job Slurm has forgotten (past MinJobAge, no accounting): its worker's manifest says how
    it ended, if it wrote one."""
    manifest = jobdir.read_json(jobdir.manifest)
    if not manifest:
        return None
    succeeded = manifest.get("status") == JobState.SUCCEEDED
    return BackendStatus(
        state=JobState.SUCCEEDED if succeeded else JobState.FAILED, reason="" if succeeded else manifest.get("reason", ""),
        granted=_allocated_gpus(jobdir), started_at=manifest.get("started_at"),
        finished_at=manifest.get("finished_at"), node=(jobdir.read_json(jobdir.path / ALLOCATION) or {}).get("node"),
    )  # fmt: skip


# --- reading Slurm's output ---------------------------------------------------------------------


def from_squeue(job: dict) -> SlurmJob:
    """A job from ``squeue --json`` (22.05; the value objects of later versions are read too)."""
    node = job.get("batch_host") or job.get("nodes") or ""
    return SlurmJob(
        slurm_id=str(job["job_id"]),
        state=_first(job.get("job_state")),
        reason=job.get("state_reason") or "",
        node=node,
        gpus=gres_indices(job.get("gres_detail") or []) if node else None,
        start=_number(job.get("start_time")),
        end=_number(job.get("end_time")),
        time_limit_s=_minutes(job.get("time_limit")),
        exit_code=_exit_code(job.get("exit_code")),
        priority=int(_number(job.get("priority")) or 0),
        submitted=_number(job.get("submit_time")) or 0.0,
        partitions=frozenset(_split(job.get("partition") or "")),
        workdir=job.get("current_working_directory") or "",
    )


def from_sacct(row: list[str]) -> SlurmJob:
    """A job from ``sacct --parsable2`` with JobIDRaw,State,Start,End,NodeList,ExitCode,
    Timelimit,Partition,WorkDir (times as POSIX seconds)."""
    slurm_id, state, start, end, nodes, exit_code, limit, partition, workdir = (row + [""] * 9)[:9]
    return SlurmJob(
        slurm_id=slurm_id,
        state=state.split()[0] if state else "UNKNOWN",  # "CANCELLED by 1000"
        node="" if nodes in NOT_STARTED_NODES else nodes,
        start=float(start) if start.isdigit() else None,
        end=float(end) if end.isdigit() else None,
        time_limit_s=parse_slurm_duration(limit),
        exit_code=int(exit_code.split(":")[0]) if exit_code[:1].isdigit() else None,
        partitions=frozenset(_split(partition)),
        workdir=workdir,
    )


def gres_indices(gres_detail: list[str]) -> list[str]:
    """GPU indices from ``gres_detail``: ["gpu:2(IDX:0-1)"], ["gpu:a100:2(IDX:0,3)"] -> indices."""
    indices = []
    for entry in gres_detail:
        match = re.match(r"gpu(?::[^:(]+)?(?::\d+)?\(IDX:([^)]*)\)", entry)
        if match:
            indices.extend(_expand_ranges(match.group(1)))
    return indices


def gpu_count(gres: str) -> int:
    """GPUs of a node from its gres: "gpu:2", "gpu:a100:4(S:0-1)", "gpu:a100:2,gpu:v100:2"."""
    return sum(int(n) for n in re.findall(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)", gres))


def deadline_limits(
    deadline: float, estimate_s: float, max_runtime_s: float, now: float | None = None
) -> tuple[str, str]:
    """``--deadline``, and ``--time-min`` ("" for none): Slurm expires a job that cannot *end*
    by its deadline, reckoning with its time limit unless it has a shorter least run time, which
    is e31's estimate (in whole minutes, at least one). A least run time that no longer fits is
    left out: Slurm would refuse the job outright, where e31 expires it (as Slurm then does)."""
    least_s = math.ceil(max(estimate_s, 60) / 60) * 60
    fits = (time.time() if now is None else now) + least_s <= deadline
    least = slurm_duration(least_s) if least_s < max_runtime_s and fits else ""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(deadline)), least


def update_fields(
    request: Request, before: Request, name: str, now: float | None = None, after: list[dict] | None = None
) -> list[str]:
    """The ``scontrol update`` fields that make a pending job ask for ``request`` (it asked for
    ``before``), and run after the jobs of the handles ``after`` where given. What Slurm cannot
    undo in place is refused, saying what to do instead."""
    if request.deadline is None and before.deadline is not None:
        raise InvalidRequest(
            "deadline: Slurm cannot take the deadline off a job it holds. Give a later one "
            "(--deadline), or resubmit the job without one (e31 resubmit) and cancel this one."
        )
    if before.gpus and not request.gpus:
        raise InvalidRequest(
            "gpus: Slurm cannot take every GPU from a job that asked for some (it would still be "
            "given them). Ask for 1 or more, or resubmit it with --gpus 0 and cancel this one."
        )
    fields = [f"Name={name}", f"TimeLimit={slurm_duration(request.max_runtime_s)}"]
    if request.gpus:
        fields.append(f"Gres=gpu:{request.gpus}")
    if request.deadline is not None:
        deadline, least = deadline_limits(request.deadline, request.runtime_estimate(), request.max_runtime_s, now)
        fields += [f"Deadline={deadline}", f"TimeMin={least or 0}"]
    if after is not None:
        fields.append(f"Dependency={dependency(after)}")
    return fields


def dependency(after: Sequence[dict]) -> str:
    """Slurm's dependency on the jobs of these handles succeeding ("" for none)."""
    return f"afterok:{':'.join(handle['slurm_id'] for handle in after)}" if after else ""


def slurm_duration(seconds: float) -> str:
    """Slurm's ``--time`` format, in the whole minutes Slurm enforces (rounded up): [D-]HH:MM:SS."""
    minutes = max(1, math.ceil(seconds / 60 - 1e-9))
    days, minutes = divmod(minutes, 1440)
    hours, minutes = divmod(minutes, 60)
    return (f"{days}-" if days else "") + f"{hours:02d}:{minutes:02d}:00"


def parse_slurm_duration(text: str) -> float | None:
    """Seconds from Slurm's [D-][HH:]MM:SS ("UNLIMITED" and the like: None)."""
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text.strip())
    if not match:
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def _same_job(job: SlurmJob | None, handle: dict) -> SlurmJob | None:
    """The Slurm job, if it is still the one e31 submitted: job ids start again when a cluster
    loses its state, and another job with the same id runs elsewhere."""
    if job is not None and job.workdir and job.workdir != str(Path(handle["jobdir"]) / "work"):
        return None
    return job


def _allocated_gpus(jobdir: JobDir) -> list[str]:
    """The GPUs the batch script saw (SLURM_JOB_GPUS), for jobs Slurm no longer details."""
    allocation = jobdir.read_json(jobdir.path / ALLOCATION) or {}
    return _split(allocation.get("gpus", ""))


def _node_usable(node: dict) -> bool:
    flags = {str(f).upper() for f in node.get("state_flags") or []}
    return str(_first(node.get("state"))).lower() not in UNUSABLE_NODE_STATES and not flags & {
        "DRAIN", "DRAINED", "DRAINING", "NOT_RESPONDING", "FAIL",
    }  # fmt: skip


def _slurm_message(text: str) -> str:
    """The last error line of a Slurm command, without its "sbatch: error:" prefix, nor the
    words sbatch puts before the reason ("Batch job submission failed:", or with --test-only,
    "allocation failure:")."""
    prefixes = r"^(?:\w+: (?:error|fatal): )?(?:Batch job submission failed: |allocation failure: )?"
    lines = [re.sub(prefixes, "", line).strip() for line in text.strip().splitlines()]
    return next((line for line in reversed(lines) if line), "")


def _expand_ranges(text: str) -> list[str]:
    """ "0-1,3" -> ["0", "1", "3"]."""
    found: list[str] = []
    for part in _split(text):
        low, _, high = part.partition("-")
        if low.isdigit() and (high.isdigit() or not high):
            found.extend(str(i) for i in range(int(low), int(high or low) + 1))
    return found


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _first(value) -> str:
    """A job state: "RUNNING" in 22.05, ["RUNNING", ...] later."""
    return (value[0] if value else "UNKNOWN") if isinstance(value, list) else (value or "UNKNOWN")


def _number(value) -> float | None:
    """A number from 22.05's plain values or later versions' {"set", "infinite", "number"}."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _minutes(value) -> float | None:
    minutes = _number(value)
    return minutes * 60 if minutes else None


def _exit_code(value) -> int | None:
    """squeue's exit code: 22.05 gives the wait status (code << 8 | signal), later a dict."""
    if isinstance(value, dict):
        code = _number(value.get("return_code"))
        return None if code is None else int(code)
    status = _number(value)
    return None if status is None else int(status) >> 8
