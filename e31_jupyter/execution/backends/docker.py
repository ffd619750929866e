"""A job as a Docker container on the engine that ``DOCKER_HOST`` (or the default socket) names.

The container runs the same worker as the local backend, ``python3 -m e31_jupyter.execution.worker
JOBDIR``, with this e31_jupyter package mounted read-only, so progress, outputs and manifest are
the same; the image needs only Python with papermill, ipykernel and nbconvert. Each image is
checked once, before its first job, by ``image_check`` run the way a job runs (the same mounts,
user and environment); the default image is also checked when the server starts
(``check_default_image``), so an admin reads what it lacks in the log. The container gets:

- exactly the granted GPUs, as a device request with the ``gpu`` capability;
- the job's directory, read-write at the same path, and the configured read-only mounts: nothing
  else of the host; a private ``/tmp`` is its home;
- no network unless configured, the job's memory and CPU limits, all capabilities dropped;
- the configured uid, or else the job's account's uid:gid (its submitter's, ``accounts.runs_as``),
  and the job's directory given to that user before it starts;
- an environment that holds no secret (``job_env``: the allowlist without this machine's paths);
- the label ``e31.job=<job id>``: a restarted server adopts running containers, and release
  removes the job's containers whatever state they are in.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest, Mount

from e31_jupyter.core.errors import E31Error
from e31_jupyter.core.job import ContainerLimits
from e31_jupyter.execution import accounts
from e31_jupyter.execution.accounts import Account
from e31_jupyter.execution.gpus import visible_devices_env
from e31_jupyter.execution.job_env import job_environment
from e31_jupyter.execution.jobdir import JobDir

log = logging.getLogger("e31")

JOB_LABEL = "e31.job"
PACKAGE_DIR = Path(__file__).resolve().parents[2]  # this e31_jupyter package
PACKAGE_PARENT_IN_CONTAINER = "/opt/e31"
HOME_IN_CONTAINER = "/tmp"
REQUIRED_MODULES = ("papermill", "ipykernel")  # what the worker needs (image_check.NEEDED)
REPORT_MODULES = ("nbconvert",)  # what the HTML report needs; without it the job runs, reportless
ENGINE_RETRY_S = 2.0

# The worker, with its output appended to job.log as the local backend does (images need no shell).
_LOGGED_WORKER = (
    "import os, runpy, sys; "
    "log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644); "
    "os.dup2(log, 1); os.dup2(log, 2); "
    "sys.argv = sys.argv[1:]; "
    "runpy.run_module('e31_jupyter.execution.worker', run_name='__main__', alter_sys=True)"
)


class DockerBackend:
    starts_slowly = True  # creating and starting a container takes the engine a second or so

    def __init__(
        self,
        image: str = "",
        allowed_images: Sequence[str] = (),
        mounts: Sequence[str] = (),
        network: str = "none",
        memory_bytes: int | None = None,
        cpus: float | None = None,
        user: str = "",
        python: str = "python3",
        job_env: Sequence[str] = (),
    ):
        self.container_limits = ContainerLimits(image, list(allowed_images), memory_bytes, cpus)
        self.mounts = [_read_only_mount(m) for m in mounts]
        self.network = network
        self.user = user  # "UID[:GID]" of every container; "": the job's account's
        self.python = python
        self.job_env = list(job_env)  # c.E31.job_env: more variables for every job
        self._engine: docker.DockerClient | None = None
        self._usable_images: set[str] = set()  # ids of images that have what a job needs

    @property
    def engine(self) -> docker.DockerClient:
        if self._engine is None:
            self._engine = _connect()
        return self._engine

    # --- the backend interface ----------------------------------------------------------------

    def start(self, job_id: str, jobdir: JobDir, devices: list[str], account: Account | None = None) -> dict:
        container = self.create(job_id, jobdir, devices, account)
        try:
            container.start()
        except APIError as error:  # e.g. GPUs asked of an engine without GPU support
            container.remove(force=True)
            raise E31Error(f"the Docker engine could not start the container: {_message(error)}") from None
        return {"container": container.id}

    def recover(self, job_id: str, jobdir: JobDir, account: Account | None = None) -> dict | None:
        """The handle of the job's container, found by its label: for a server that died between
        starting the container and recording its handle."""
        try:
            running = [c for c in self._job_containers(job_id) if c.status == "running"]
        except DockerException as error:
            log.warning("e31: cannot ask the Docker engine about job %s (%s)", job_id, error)
            return None
        return {"container": running[0].id} if running else None

    def adopt(self, job_id: str, handle: dict | None) -> bool:
        """True when the job's container from ``handle`` is still running (or the engine cannot
        say now: the job is not given up for lost while the engine is away; wait() rides it out)."""
        try:
            container = self._container(handle)
        except (DockerException, E31Error) as error:
            log.warning("e31: cannot ask the Docker engine about job %s (%s)", job_id, error)
            return True
        return container is not None and container.status == "running"

    def wait(self, handle: dict) -> int | None:
        """The container's exit code, a signal as a negative number like the local backend's
        (None when the container is gone). Rides out a restart of the engine."""
        while True:
            try:
                return _signal_as_negative(_wait_for_exit(handle["container"]))
            except NotFound:
                return None
            except (DockerException, OSError, E31Error) as error:
                log.warning("e31: lost the Docker engine while waiting for a job (%s); retrying", error)
                time.sleep(ENGINE_RETRY_S)

    def stop(self, job_id: str, handle: dict, grace: float) -> None:
        """SIGTERM to the worker, SIGKILL to the whole container after ``grace`` seconds."""
        container = self._container(handle)
        try:
            if container is not None:
                container.stop(timeout=max(1, math.ceil(grace)))
        except NotFound:
            pass  # it ended and was removed meanwhile

    def warn(self, job_id: str, handle: dict) -> None:
        try:
            container = self._container(handle)
            if container is not None:
                container.kill(signal="SIGUSR2")
        except (NotFound, APIError):  # it ended meanwhile: there is no one to tell
            pass

    def suspend(self, job_id: str, handle: dict, grace: float, stop_grace: float) -> None:
        """SIGUSR1 to the worker (it stops at its cell's end, saving a checkpoint); ``stop`` after
        ``grace`` seconds if it has not ended by then."""
        container = self._container(handle)
        try:
            if container is None:
                return
            container.kill(signal="SIGUSR1")
            container.wait(timeout=grace)
        except NotFound:
            return  # it ended and was removed meanwhile
        except Exception:  # still running after grace (the engine's timeout), or the signal refused
            self.stop(job_id, handle, stop_grace)

    def clean_up(self, job_id: str, account: Account | None = None) -> None:
        """Release: remove every container of the job, running or not."""
        try:
            for container in self._job_containers(job_id):
                container.remove(force=True)
        except NotFound:
            pass  # removed meanwhile
        except (DockerException, E31Error) as error:
            log.warning("e31: could not remove the containers of job %s: %s", job_id, error)

    # --- the container --------------------------------------------------------------------------

    def create(self, job_id: str, jobdir: JobDir, devices: list[str], account: Account | None = None):
        """The job's container, created and not yet started, run as ``account`` (default: the
        server's) unless c.E31.docker_user names a user for all."""
        account = account or accounts.current()
        spec = jobdir.read_json(jobdir.spec)
        image = spec.get("image") or self.container_limits.default_image
        self._check_image(image)
        user = self.user or f"{account.uid}:{account.gid}"
        uid, _, gid = user.partition(":")
        accounts.give_folder(jobdir.path, int(uid), int(gid) if gid else -1)
        settings = self._settings(job_id, jobdir, devices, spec["request"], user, account)
        try:
            return self.engine.containers.create(image, **settings)
        except APIError as error:
            raise E31Error(f"the Docker engine could not create the container: {_message(error)}") from None

    def _settings(
        self, job_id: str, jobdir: JobDir, devices: list[str], request: dict, user: str, account: Account
    ) -> dict:
        path = str(jobdir.path.resolve())
        package = f"{PACKAGE_PARENT_IN_CONTAINER}/{PACKAGE_DIR.name}"
        memory = request.get("memory_bytes") or self.container_limits.max_memory_bytes
        cpus = request.get("cpus") or self.container_limits.max_cpus
        return {
            "command": [self.python, "-c", _LOGGED_WORKER, str(jobdir.log.resolve()), path],
            "name": f"e31-{job_id}",
            "labels": {JOB_LABEL: job_id},
            "user": user,
            "working_dir": str(jobdir.work.resolve()),
            "environment": self._environment(job_id, devices, account),
            "mounts": [_mount(path, path, read_only=False), _mount(str(PACKAGE_DIR), package), *self.mounts],
            "tmpfs": {HOME_IN_CONTAINER: "mode=1777"},
            "network_mode": self.network,
            "device_requests": [_gpu_request(devices)] if devices else None,
            "mem_limit": memory,
            "memswap_limit": memory,  # no swap beyond the limit
            "nano_cpus": int(cpus * 1e9) if cpus else None,
            "init": True,  # an init process as PID 1 passes SIGTERM on and reaps orphans
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
        }

    def _environment(self, job_id: str, devices: list[str], account: Account) -> dict[str, str]:
        # In the container the granted GPUs are the only ones, numbered from 0; the engine sets
        # NVIDIA_VISIBLE_DEVICES from the device request (and "void" hides all from a 0-GPU job).
        visible = visible_devices_env([str(i) for i in range(len(devices))])
        if devices:
            del visible["NVIDIA_VISIBLE_DEVICES"]
        env = job_environment(account, job_id, visible, self.job_env, on_host=False)
        env.update({"HOME": HOME_IN_CONTAINER, "PYTHONPATH": PACKAGE_PARENT_IN_CONTAINER})
        return env

    def _check_image(self, image: str) -> None:
        """The image is on the engine and has Python with what the worker imports. One that
        cannot render reports is accepted (its jobs' reports fail and say why), with a warning."""
        if not image:
            raise E31Error("the job names no image and there is no default (c.E31.docker_image).")
        try:
            image_id = self.engine.images.get(image).id
        except ImageNotFound:
            message = f"the image {image!r} is not on the Docker engine; pull or build it there."
            raise E31Error(message) from None
        if image_id in self._usable_images:
            return
        found = self.probe(image)
        if found["cannot_run"]:
            raise E31Error(
                f"the image {image!r} cannot run e31 jobs: {'; '.join(found['cannot_run'])}. A job's image must "
                f"contain Python 3.10+ ({self.python}) with {', '.join(REQUIRED_MODULES + REPORT_MODULES)}: add "
                f"`pip install {' '.join(REQUIRED_MODULES + REPORT_MODULES)}` to it."
            )
        if found["report"]:
            log.warning("e31: jobs in the image %r will have no HTML report: %s", image, found["report"])
        self._usable_images.add(image_id)

    def close(self) -> None:
        """Close the connection to dockerd (containers that run go on)."""
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()

    def check_default_image(self) -> None:
        """At the server's start: say in the log whether the default image can run jobs and
        render their reports, and what it lacks. Only warns: an image can be fixed (rebuilt,
        pulled) while the server runs, and jobs may name other images."""
        image = self.container_limits.default_image
        if not image:
            return
        try:
            self._check_image(image)
        except (E31Error, DockerException) as error:
            log.error(
                "e31: %s Jobs in the default image (c.E31.docker_image) will fail until it is fixed.",
                error if isinstance(error, E31Error) else f"cannot check the image {image!r}: {error}",
            )
            return
        log.info("e31: the default image %r can run e31 jobs", image)

    def probe(self, image: str) -> dict:
        """``image_check``'s verdict on ``image``, run as a job of the server's own account
        runs: its user, environment, the job mounts, no network."""
        account = accounts.current()
        settings = {
            "user": self.user or f"{account.uid}:{account.gid}",
            "environment": self._environment("image-check", [], account),
            "mounts": [_mount(str(PACKAGE_DIR), f"{PACKAGE_PARENT_IN_CONTAINER}/{PACKAGE_DIR.name}"), *self.mounts],
            "tmpfs": {HOME_IN_CONTAINER: "mode=1777"},
            "working_dir": HOME_IN_CONTAINER,
            "network_mode": "none",
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
        }
        probe = self.engine.containers.create(
            image, [self.python, "-m", "e31_jupyter.execution.image_check", image], **settings
        )
        try:
            probe.start()
            status = probe.wait()["StatusCode"]
            return _verdict(probe.logs(stdout=True, stderr=False), probe.logs(stdout=False, stderr=True), status)
        except APIError as error:  # no such command in the image
            return {"cannot_run": [_message(error)], "report": ""}
        finally:
            probe.remove(force=True)

    def _job_containers(self, job_id: str) -> list:
        return self.engine.containers.list(all=True, filters={"label": f"{JOB_LABEL}={job_id}"}, ignore_removed=True)

    def _container(self, handle: dict | None):
        if not handle:
            return None
        try:
            return self.engine.containers.get(handle["container"])
        except NotFound:
            return None


def _verdict(stdout: bytes, stderr: bytes, status: int) -> dict:
    """image_check's JSON line; else what went wrong, in the words of its last line of errors."""
    lines = stdout.decode(errors="replace").strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        errors = stderr.decode(errors="replace").strip().splitlines()
        return {"cannot_run": [errors[-1] if errors else f"the check exited with {status}"], "report": ""}


def _connect() -> docker.DockerClient:
    try:
        return docker.from_env()
    except DockerException as error:
        where = os.environ.get("DOCKER_HOST") or "the default socket"
        raise E31Error(f"cannot reach the Docker engine at {where}: {error}") from None


def _wait_for_exit(container_id: str) -> int:
    engine = _connect()  # a connection of its own: this wait may last days
    try:
        return engine.api.wait(container_id, timeout=None)["StatusCode"]
    finally:
        engine.close()


def _gpu_request(devices: list[str]) -> DeviceRequest:
    """Exactly these GPUs (indices or UUIDs), from whichever driver offers the gpu capability."""
    return DeviceRequest(device_ids=list(devices), capabilities=[["gpu"]])


def _mount(source: str, target: str, read_only: bool = True) -> Mount:
    return Mount(target=target, source=source, type="bind", read_only=read_only)


def _read_only_mount(text: str) -> Mount:
    """'HOST' (mounted at the same path) or 'HOST:CONTAINER'."""
    source, _, target = text.partition(":")
    return _mount(source, target or source)


def _message(error: APIError) -> str:
    """What the engine said, without the HTTP wrapping."""
    explanation = error.explanation
    return explanation.decode() if isinstance(explanation, bytes) else explanation or str(error)


def _signal_as_negative(status: int) -> int:
    """A container killed by signal N exits with 128 + N; the queue expects -N, as from Popen."""
    try:
        return -signal.Signals(status - 128) if status > 128 else status
    except ValueError:
        return status
