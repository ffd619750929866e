"""REST handlers under ``/e31/api/`` (described in ``openapi.yaml``).

Thin: authenticate with jupyter_server, turn the request into a queue call, answer JSON. Every
E31Error becomes its 4xx status with ``{"message": ...}``; no traceback ever reaches a client.
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

from jupyter_server.auth.decorator import authorized
from jupyter_server.auth.identity import IdentityProvider, LegacyIdentityProvider, PasswordIdentityProvider
from jupyter_server.base.handlers import APIHandler
from tornado import web

from e31_jupyter import __version__
from e31_jupyter.core.errors import Conflict, E31Error, InvalidRequest, NotFound
from e31_jupyter.core.job import PAGE_SIZE, parse_iso, whole_number
from e31_jupyter.core.states import FINAL_STATES
from e31_jupyter.execution import accounts
from e31_jupyter.execution.jobdir import JobDir
from e31_jupyter.execution.outputs import collected_file
from e31_jupyter.notebook import values
from e31_jupyter.service.admission import Caller
from e31_jupyter.service.queue import Queue

AUTH_RESOURCE = "e31"
LOG_CHUNK = 1 << 20
FILE_CHUNK = 4 << 20
# jupyter_server's own identity providers serve one person behind a shared token or password
# and invent a new anonymous name per browser session; with them every job belongs to the
# account the server runs as. Other providers (JupyterHub's, say) name real users.
SINGLE_USER_PROVIDERS = (IdentityProvider, PasswordIdentityProvider, LegacyIdentityProvider)


def _answers_errors(method):
    """Turn E31Error into its status with a JSON message, and anything else into a JSON 500
    without a traceback."""

    @functools.wraps(method)
    async def wrapper(self, *args, **kwargs):
        try:
            return await method(self, *args, **kwargs)
        except E31Error as error:
            self.set_status(error.status)
            self.finish({"message": error.message})
        except web.HTTPError:
            raise
        except Exception:
            self.log.exception("e31: unexpected error in %s %s", self.request.method, self.request.path)
            self.set_status(500)
            self.finish({"message": "Internal error in the e31 queue; the server log has details."})

    return wrapper


class E31Handler(APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def queue(self) -> Queue:
        return self.settings["e31_queue"]

    @property
    def caller(self) -> Caller:
        if type(self.identity_provider) in SINGLE_USER_PROVIDERS:
            name = accounts.current().name  # from the kernel, not from $LOGNAME
        else:
            name = self.current_user.username
        return Caller(name, is_admin=self._is_admin(name))

    def _is_admin(self, name: str) -> bool:
        group = self.settings["e31_admin_group"]
        return name in self.settings["e31_admin_users"] or bool(group and accounts.in_group(name, group))

    def json_body(self) -> dict:
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError as error:
            raise InvalidRequest(f"The request body is not valid JSON ({error}).") from None
        if not isinstance(body, dict):
            raise InvalidRequest("The request body must be a JSON object.")
        return body

    async def send_file(self, jobdir: JobDir, file: Path) -> None:
        """A file of the job as a download, in chunks; never rendered in the server's origin.
        Opened as ``JobDir.open_file`` opens it: no link followed, nothing outside the job's folder."""
        with _job_file(jobdir, file) as f:
            self.set_header("Content-Type", "application/octet-stream")  # sent with the first chunk
            self.set_header("Content-Disposition", f'attachment; filename="{file.name}"')
            self.set_header("Content-Security-Policy", "sandbox")
            self.set_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            while chunk := f.read(FILE_CHUNK):
                self.write(chunk)
                await self.flush()
        self.finish(set_content_type="application/octet-stream")  # APIHandler would say JSON

    @property
    def kernels(self) -> list[str]:
        return list(self.kernel_spec_manager.find_kernel_specs())

    @property
    def root_dir(self) -> Path:
        return Path(self.settings.get("server_root_dir", ".")).expanduser()

    def answer_submitted(self, job: dict, warnings: list[str]) -> None:
        self.set_status(201)
        self.finish({**job, "warnings": warnings})

    def job_and_dir(self, job_id: str):
        return self.queue.files_of(self.caller, job_id)


class JobsHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self):
        jobs, next_page = self.queue.views.jobs(
            self.caller,
            state=self.get_argument("state", None),
            fingerprint=self.get_argument("fingerprint", None),
            ids=self.get_arguments("id") or None,
            before=self.get_argument("before", None),
            limit=whole_number(self.get_argument("limit", str(PAGE_SIZE)), "limit"),
        )
        self.finish({"jobs": jobs, "next": next_page})

    @web.authenticated
    @authorized
    @_answers_errors
    async def post(self):
        self.answer_submitted(*await self.queue.submit(self.caller, self.json_body(), self.kernels, self.root_dir))


class CheckHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def post(self):
        self.finish(await self.queue.check(self.caller, self.json_body(), self.kernels, self.root_dir))


class JobHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self, job_id):
        job = self.queue.views.visible_job(self.caller, job_id)
        self.finish({**self.queue.views.describe(job), "transitions": self.queue.views.transitions(job)})

    @web.authenticated
    @authorized
    @_answers_errors
    async def patch(self, job_id):
        self.finish(await self.queue.update(self.caller, job_id, self.json_body()))


class CancelHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def post(self, job_id):
        self.finish(await self.queue.cancel(self.caller, job_id))


class ResubmitHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def post(self, job_id):
        changes = self.json_body()
        self.answer_submitted(*await self.queue.resubmit(self.caller, job_id, changes, self.kernels, self.root_dir))


class SuspendHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def post(self, job_id):
        self.finish(await self.queue.suspend(self.caller, job_id))


class ResumeHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def post(self, job_id):
        self.finish(await self.queue.resume(self.caller, job_id, self.json_body()))


class ResubmitCheckHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def post(self, job_id):
        changes = self.json_body()
        self.finish(await self.queue.check_resubmit(self.caller, job_id, changes, self.kernels, self.root_dir))


class NotebookHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self, job_id):
        job, jobdir = self.job_and_dir(job_id)
        notebook = _read_job_file(jobdir, jobdir.executed_notebook)
        if notebook is None:
            raise Conflict(f"Job {job_id} is {job['state']} and has no executed notebook yet.")
        self.set_header("Content-Type", "application/json")
        self.finish(notebook)


def _why_no_report(job: dict) -> str:
    """Why an ended job has no report: it failed (and why), or none was asked for."""
    if job["state"] not in FINAL_STATES:
        return " yet."
    failures = (job.get("result") or {}).get("after_work_failures") or []
    failed = [f["reason"] for f in failures if f.get("step") == "report"]
    return f": {failed[0]}" if failed else " (it was not asked for)."


class ReportHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self, job_id):
        job, jobdir = self.job_and_dir(job_id)
        report = _read_job_file(jobdir, jobdir.report)
        if report is None:
            raise Conflict(f"Job {job_id} is {job['state']} and has no HTML report{_why_no_report(job)}")
        # The report is the job's own content: never let it run as this server's origin.
        self.set_header("Content-Security-Policy", "sandbox allow-scripts allow-popups")
        self.finish(report, set_content_type="text/html; charset=utf-8")


class FilesHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self, job_id):
        _, jobdir = self.job_and_dir(job_id)
        manifest = jobdir.read_json(jobdir.manifest, {})
        self.finish({"files": manifest.get("files", []), "left_out": manifest.get("left_out", [])})

    @web.authenticated
    @authorized
    @_answers_errors
    async def delete(self, job_id):
        self.finish(await self.queue.delete_files(self.caller, job_id))


class FileHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self, job_id, path):
        _, jobdir = self.job_and_dir(job_id)
        await self.send_file(jobdir, collected_file(jobdir, jobdir.read_json(jobdir.manifest), path))


class ValuesHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self, job_id):
        _, jobdir = self.job_and_dir(job_id)
        index = jobdir.values_index()
        self.finish({"values": values.describe(index), "files": values.files(index)})


class ValueFileHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self, job_id, name):
        _, jobdir = self.job_and_dir(job_id)
        if name not in values.files(jobdir.values_index()):
            raise NotFound(f"Job {job_id} returned no value file {name!r}.")
        await self.send_file(jobdir, jobdir.values / name)


class LogHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self, job_id):
        job, jobdir = self.job_and_dir(job_id)
        data = _read_job_file(jobdir, jobdir.log) or b""
        tail = self.get_argument("tail", None)
        if tail is not None:
            lines = whole_number(tail, "tail")
            text = b"\n".join(data.splitlines()[-lines:]).decode(errors="replace") if lines else ""
            self.finish({"text": text, "offset": len(data), "final": job["state"] in FINAL_STATES})
            return
        offset = whole_number(self.get_argument("offset", "0"), "offset")
        chunk = data[offset : offset + LOG_CHUNK]
        end = offset + len(chunk)
        final = job["state"] in FINAL_STATES and end >= len(data)
        self.finish({"text": chunk.decode(errors="replace"), "offset": end, "final": final})


class MeterHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self):
        now = time.time()
        since = self.get_argument("since", None)
        until = self.get_argument("until", None)
        since_ts = parse_iso(since, "since") if since else now - 7 * 86400
        until_ts = parse_iso(until, "until") if until else now
        if until_ts < since_ts:
            raise InvalidRequest("until must not be before since.")
        self.finish(self.queue.views.meter_summary(self.caller, since_ts, until_ts))


class InfoHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self):
        """What a client needs: the inbox where a kernel on this machine may stage captured
        values, who the caller is (the owner name of their jobs), how the server's job events
        name them (server/events.py), and what a GPU-hour costs (a submit's estimate)."""
        caller, settings = self.caller, self.queue.settings
        self.finish({
            "version": __version__, "inbox": str(self.queue.inbox_for(caller)),
            "user": caller.name, "admin": caller.is_admin,
            "events_key": self.settings["e31_events"].owner_key(caller.name),
            "gpu_hour_rate": settings.gpu_hour_rate, "currency": settings.currency,
        })  # fmt: skip


class GpusHandler(E31Handler):
    @web.authenticated
    @authorized
    @_answers_errors
    async def get(self):
        pool = self.queue.views.gpu_pool(self.caller)
        self.finish({**pool, "source": self.settings["e31_gpu_source"]})


def _job_file(jobdir: JobDir, path: Path):
    """``path`` of the job's folder, open; a missing one is NotFound."""
    try:
        return jobdir.open_file(path)
    except FileNotFoundError:
        raise NotFound(f"Job {jobdir.path.name} has no file {path.relative_to(jobdir.path)}.") from None


def _read_job_file(jobdir: JobDir, path: Path) -> bytes | None:
    """The contents of ``path`` of the job's folder, None when it has none."""
    try:
        with jobdir.open_file(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


class UnavailableHandler(APIHandler):
    """The queue could not start: every e31 call says why (503), nothing pretends to work."""

    auth_resource = AUTH_RESOURCE

    def initialize(self, reason: str) -> None:
        self.reason = reason

    def _refuse(self, path: str = "") -> None:
        self.set_status(503)
        self.finish({"message": f"The e31 queue of this server did not start: {self.reason}"})

    get = post = patch = delete = web.authenticated(authorized(_refuse))


def unavailable_routes(reason: str) -> list[tuple[str, type, dict]]:
    return [(r"/e31/api/(?P<path>.*)", UnavailableHandler, {"reason": reason})]


def routes() -> list[tuple[str, type]]:
    job = r"/e31/api/jobs/(?P<job_id>[^/]+)"  # any id: unknown ones get a JSON 404 from us
    return [
        (r"/e31/api/jobs", JobsHandler),
        (r"/e31/api/check", CheckHandler),
        (job, JobHandler),
        (job + r"/cancel", CancelHandler),
        (job + r"/resubmit", ResubmitHandler),
        (job + r"/resume", ResumeHandler),
        (job + r"/suspend", SuspendHandler),
        (job + r"/resubmit/check", ResubmitCheckHandler),
        (job + r"/notebook", NotebookHandler),
        (job + r"/report", ReportHandler),
        (job + r"/files", FilesHandler),
        (job + r"/files/(?P<path>.+)", FileHandler),
        (job + r"/log", LogHandler),
        (job + r"/values", ValuesHandler),
        (job + r"/values/(?P<name>[^/]+)", ValueFileHandler),
        (r"/e31/api/info", InfoHandler),
        (r"/e31/api/meter", MeterHandler),
        (r"/e31/api/gpus", GpusHandler),
    ]
