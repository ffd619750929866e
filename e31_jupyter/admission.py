"""Admission: what a submit asks for, checked before anything is staged or recorded.

A submit and a checked submit (``--check``) go through the same ``propose``: the request, the
data it names, the jobs it runs after, the caller's share of the queue, and the notebook. It
raises what it refuses and returns the job, with warnings for what it accepts.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from .dependencies import ENDED_OTHERWISE, validate_after
from .errors import E31Error, InvalidRequest
from .job import (
    JobSpec,
    JobState,
    Limits,
    validate_image,
    validate_outputs,
    validate_parameters,
    validate_request,
    validate_text,
)
from .notebook_checks import notebook_warnings
from .packaging import kernel_of, notebook_from_request
from .settings import Settings
from .staging import check_size, data_paths, inputs_path
from .store import Store


@dataclass(frozen=True)
class Caller:
    """Who is asking: the identity from jupyter_server, and whether they are an admin."""

    name: str
    is_admin: bool = False


@dataclass
class Proposal:
    """A job as asked for and checked, not yet staged or recorded."""

    spec: JobSpec
    notebook: dict
    data: list[Path]
    inputs: Path | None
    warnings: list[str]


class Admission:
    """Checks submits against the queue's settings and the jobs it has recorded."""

    def __init__(self, store: Store, settings: Settings, data_dir: Path, backend):
        self._store = store
        self._settings = settings
        self._data_dir = data_dir
        self._backend = backend

    async def propose(self, caller: Caller, body: dict, kernels: list[str], root_dir: Path, now: float) -> Proposal:
        """The job ``body`` asks for, checked as a submit checks it (raises what it refuses),
        with the warnings for what it accepts."""
        if not isinstance(body, dict):
            raise InvalidRequest("The request body must be a JSON object.")
        limits = Limits(
            self._settings.inventory, self._settings.default_max_runtime_s, kernels,
            container=getattr(self._backend, "container_limits", None),
        )  # fmt: skip
        request, warnings = validate_request(body, limits, now)
        outputs, reports = validate_outputs(body)
        parameters = validate_parameters(body.get("parameters"))
        self._check_queued_limit(caller)
        data = data_paths(body.get("data"), root_dir)
        for path in data:
            if self._data_dir.resolve().is_relative_to(path.resolve()):
                raise InvalidRequest(
                    f"data: {str(path)!r} holds e31's own data directory; name the files or "
                    "folders the job needs instead."
                )
        after = self._valid_after(caller, body.get("after"))
        inputs = inputs_path(body.get("inputs"))
        await asyncio.to_thread(check_size, data + ([inputs] if inputs else []), self._settings.max_input_bytes)
        notebook, notebook_name, folder = notebook_from_request(body, root_dir)
        kernel = kernel_of(notebook, kernels)
        # Reading a long notebook's code takes a while: off the event loop.
        warnings += await asyncio.to_thread(notebook_warnings, notebook, kernel, parameters, folder, data)
        spec = JobSpec(
            name=validate_text(body, "name") or notebook_name.removesuffix(".ipynb"),
            notebook_name=notebook_name,
            kernel=kernel,
            parameters=parameters,
            data=[str(p) for p in data],
            request=request,
            team=validate_text(body, "team"),
            outputs=outputs,
            reports=reports,
            image=validate_image(body, limits),
            max_output_bytes=self._settings.max_output_bytes,
            after=after,
        )
        return Proposal(spec, notebook, data, inputs, warnings)

    def _valid_after(self, caller: Caller, value) -> list[str]:
        """The jobs a submit asks to run after: each one the caller may see, none ended
        without succeeding."""
        after = validate_after(value)
        for job_id in after:
            job = self._store.get(job_id)
            if job is None or not (caller.is_admin or job["owner"] == caller.name):
                raise InvalidRequest(f"after: no job '{job_id}'. List your jobs with `e31 jobs`.")
            if job["state"] in ENDED_OTHERWISE:
                raise InvalidRequest(
                    f"after: job {job_id} ({job['name']}) has {job['state']}, so there is nothing to run "
                    "after. Run it again first (e31 resubmit), or leave it out."
                )
        return after

    def _check_queued_limit(self, caller: Caller) -> None:
        waiting = self._store.count((JobState.QUEUED.value,), owner=caller.name)
        if waiting >= self._settings.max_queued_per_user:
            raise E31Error(
                f"You have {waiting} jobs waiting, the most this queue takes from one user "
                "(c.E31.max_queued_per_user). Submit again when some have started, or cancel some.",
                status=429,
            )
