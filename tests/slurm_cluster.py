"""A real one-node Slurm cluster for the tests, started and stopped by the suite.

Everything lives under one temporary folder: slurm.conf and gres.conf (``SLURM_CONF`` points
at them, so the Slurm commands the e31 server runs find this cluster and no other), the state,
spool, logs and job-completion file, and two stand-in GPUs: character devices made with
``mknod`` (slurmd sets ``CUDA_VISIBLE_DEVICES`` only for gres files that are devices). Its own
``munged`` (as the munge user, with its own key and socket, in a folder of its own that the
munge user may reach) signs the daemons' messages; ``slurmctld`` and ``slurmd`` run as root on
free ports. The machine's own Slurm and munge configuration is not touched.

No cgroups, no accounting database: process tracking is by process tree, and finished jobs are
read back with ``sacct -c`` from ``jobcomp/filetxt`` (and from ``squeue`` while ``MinJobAge``
keeps them there).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

GPUS = 2
CPUS = 8
MUNGE_USER = "munge"
DAEMONS = ("munged", "slurmctld", "slurmd")

SLURM_CONF = """\
ClusterName=e31test{port}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
MailProg=/bin/true
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1,sched_min_interval=100000
PriorityType=priority/basic
MinJobAge=3600
EnforcePartLimits=ALL
KillWait=2
InactiveLimit=0
ReturnToService=2
SlurmdParameters=config_overrides
MpiDefault=none
NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cpus} Gres=gpu:{gpus} State=UNKNOWN
PartitionName=gpu Nodes={node} Default=YES MaxTime=INFINITE State=UP
PartitionName=team Nodes={node} MaxTime=INFINITE State=UP AllowAccounts=vision
"""


def why_no_slurm() -> str | None:
    """Why these tests cannot start a cluster here (None when they can)."""
    missing = [p for p in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sacct") if not shutil.which(p)]
    if missing:
        return f"no {', '.join(missing)}: install the packages in scripts/system-packages/slurm.txt"
    if os.geteuid() != 0:
        return "starting slurmctld and slurmd needs root"
    try:
        pwd.getpwnam(MUNGE_USER)
    except KeyError:
        return "no munge user: install the munge package"
    return None


class SlurmCluster:
    """One node with ``GPUS`` stand-in GPUs and ``CPUS`` CPUs; partitions ``gpu`` (the default)
    and ``team``, which only the account ``vision`` may use."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.conf = self.root / "slurm.conf"
        self.node = f"e31node{os.getpid()}"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._munge_dir: Path | None = None
        self._procs: list[subprocess.Popen] = []

    # --- life cycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 30) -> SlurmCluster:
        try:
            self._write_config()
            self._start_munged()
            self._start_daemon("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
            self._start_daemon("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
            self._wait_until_idle(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Cancel every job and wait for them to end (their processes outlive slurmd), then stop
        the daemons."""
        if len(self._procs) == len(DAEMONS):
            self.run("scancel", "--full", "--quiet", check=False)
            try:
                self._wait_for(
                    lambda: not self.run("squeue", "--noheader", check=False).stdout.strip(),
                    20,
                    "jobs to end",
                )
            except (TimeoutError, RuntimeError):
                pass  # stop the daemons all the same
        for proc in reversed(self._procs):
            _terminate(proc)
        self._procs.clear()
        if self._munge_dir:
            shutil.rmtree(self._munge_dir, ignore_errors=True)
            self._munge_dir = None

    # --- for tests ----------------------------------------------------------------------------

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(command, env=self.env, capture_output=True, text=True, check=check, timeout=30)

    def job_info(self, slurm_id: str) -> dict[str, str]:
        """``scontrol show job`` of one job, as KEY=VALUE pairs."""
        text = self.run("scontrol", "show", "job", "-o", slurm_id).stdout
        return dict(item.split("=", 1) for item in text.split() if "=" in item)

    def log_tail(self, chars: int = 3000) -> str:
        return "\n".join(
            f"--- {name}.log\n{(self.root / f'{name}.log').read_text(errors='replace')[-chars:]}"
            for name in ("munged", "slurmctld", "slurmd") if (self.root / f"{name}.log").exists()
        )  # fmt: skip

    # --- the pieces ---------------------------------------------------------------------------

    def _write_config(self) -> None:
        devices = self.root / "dev"
        for path in (self.root / "state", self.root / "spool", devices):
            path.mkdir(parents=True, exist_ok=True)
        for i in range(GPUS):  # /dev/null's numbers: any character device will do
            subprocess.run(["mknod", "-m", "666", str(devices / f"nvidia{i}"), "c", "1", "3"], check=True)
        self._munge_dir = Path(tempfile.mkdtemp(prefix="e31-munge-"))  # munged checks its folders' owners
        self.conf.write_text(SLURM_CONF.format(
            root=self.root, host=socket.gethostname(), node=self.node, port=_free_port(),
            slurmd_port=_free_port(), munge_socket=self._munge_dir / "munge.socket", cpus=CPUS, gpus=GPUS,
        ))  # fmt: skip
        (self.root / "gres.conf").write_text(f"Name=gpu File={devices}/nvidia[0-{GPUS - 1}]\n")

    def _start_munged(self) -> None:
        folder = self._munge_dir
        key = folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        user = pwd.getpwnam(MUNGE_USER)
        for path in (folder, key):
            os.chown(path, user.pw_uid, user.pw_gid)
        key.chmod(0o600)
        folder.chmod(0o755)  # clients must reach the socket
        as_munge = ["runuser", "-u", MUNGE_USER, "--", "munged", "--foreground", f"--key-file={key}"]
        self._start_daemon("munged", [
            *as_munge, f"--socket={folder / 'munge.socket'}", f"--pid-file={folder / 'munged.pid'}",
            f"--seed-file={folder / 'munged.seed'}",
        ])  # fmt: skip
        self._wait_for(lambda: (folder / "munge.socket").exists(), 10, "munged's socket")

    def _start_daemon(self, name: str, command: list[str]) -> None:
        """In the foreground (so stopping the process stops the daemon), logging to NAME.log."""
        with open(self.root / f"{name}.log", "ab") as log:
            self._procs.append(subprocess.Popen(
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            ))  # fmt: skip

    def _wait_until_idle(self, timeout: float) -> None:
        def idle():
            result = self.run("sinfo", "--noheader", "--format=%t", f"--nodes={self.node}", check=False)
            return result.returncode == 0 and result.stdout.strip() == "idle"

        self._wait_for(idle, timeout, "the Slurm node to be idle")

    def _wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}:\n{self.log_tail()}")
            if predicate():
                return
            time.sleep(0.1)
        raise TimeoutError(f"timed out after {timeout}s waiting for {what}\n{self.log_tail()}")


def _terminate(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
