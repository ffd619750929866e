"""Admission: what a submit asks for, checked before anything is staged or recorded.

A submit and a checked submit (``--check``) go through the same ``propose``: the request, the
data it names, the jobs it runs after, the caller's share of the queue, and the notebook. It
raises what it refuses and returns the job, with warnings for what it accepts. A change to a
queued job's request (``revise``) is checked the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from e31_jupyter.core.after import ENDED_OTHERWISE, validate_after
from e31_jupyter.core.errors import E31Error, InvalidRequest
from e31_jupyter.core.job import (
    ON_TIMEOUT_SUSPEND,
    JobSpec,
    Limits,
    Request,
    iso,
    validate_flag,
    validate_image,
    validate_on_timeout,
    validate_outputs,
    validate_parameters,
    validate_request,
    validate_text,
)
from e31_jupyter.core.states import JobState
from e31_jupyter.core.text import format_moment, format_seconds
from e31_jupyter.execution.backends import ClusterBackend, ProcessBackend
from e31_jupyter.notebook.checks import notebook_warnings
from e31_jupyter.notebook.job_notebook import kernel_of, notebook_from_request
from e31_jupyter.service.settings import Settings
from e31_jupyter.service.staging import check_size, data_paths, inputs_path
from e31_jupyter.service.store import Store

# What may change while a job is queued; the rest is its work, fixed at submit.
REVISABLE = ("gpus", "max_runtime", "expected_runtime", "deadline", "name", "team", "after")


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


@dataclass
class Revision:
    """A queued job's request, name or team as changed and checked, not yet recorded."""

    request: Request
    fields: dict  # store columns that change, with their new values
    changed: list[str]  # what changed, as people read it: "gpus 2 -> 1"
    warnings: list[str]

    @property
    def spec_changes(self) -> dict:
        """What the job's spec holds too, where it changed: its name, team and the jobs it runs after."""
        spec_keys = {"name": "name", "team": "team", "after_jobs": "after"}
        return {spec_keys[column]: value for column, value in self.fields.items() if column in spec_keys}


class Admission:
    """Checks submits against the queue's settings and the jobs it has recorded."""

    def __init__(
        self, store: Store, settings: Settings, data_dir: Path, backend: ProcessBackend | ClusterBackend | None
    ):
        self._store = store
        self._settings = settings
        self._data_dir = data_dir
        self._backend = backend

    async def propose(self, caller: Caller, body: dict, kernels: list[str], root_dir: Path, now: float) -> Proposal:
        """The job ``body`` asks for, checked as a submit checks it (raises what it refuses),
        with the warnings for what it accepts."""
        if not isinstance(body, dict):
            raise InvalidRequest("The request body must be a JSON object.")
        limits = self._limits(kernels)
        request, warnings = validate_request(body, limits, now)
        outputs, reports = validate_outputs(body)
        parameters = validate_parameters(body.get("parameters"))
        self._check_queued_limit(caller)
        data = data_paths(body.get("data"), root_dir, caller.name)
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
        kernel = kernel_of(notebook, kernels, body.get("kernel"))
        # Reading a long notebook's code takes a while: off the event loop.
        warnings += await asyncio.to_thread(notebook_warnings, notebook, kernel, parameters, folder, data)
        checkpoint = validate_flag(body, "checkpoint", self._settings.checkpoint_default)
        if body.get("on_timeout") == ON_TIMEOUT_SUSPEND and self._settings.inventory is None:
            raise InvalidRequest(
                "on_timeout: on Slurm the cluster ends a job at its time limit; suspend it before "
                "(e31 suspend), or give it more time (--max-runtime)."
            )
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
            checkpoint=checkpoint,
            checkpoint_share=self._settings.checkpoint_share,
            on_timeout=validate_on_timeout(body, checkpoint),
        )
        return Proposal(spec, notebook, data, inputs, warnings)

    def revise(self, caller: Caller, job: Mapping[str, Any], changes, now: float) -> Revision:
        """``job`` (a queued job's store row) with ``changes`` (REVISABLE fields, as a submit
        body gives them; a null clears a run time or the deadline), checked as a submit checks
        its request."""
        if not isinstance(changes, dict) or not changes:
            raise InvalidRequest(f"Say what to change, as a JSON object with any of: {', '.join(REVISABLE)}.")
        unknown = sorted(set(changes) - set(REVISABLE))
        if unknown:
            raise InvalidRequest(
                f"Cannot change {', '.join(unknown)} of a queued job; allowed: {', '.join(REVISABLE)}. "
                "To change its notebook, parameters or data, resubmit it (e31 resubmit) and cancel this one."
            )
        current = {
            "gpus": job["gpus_requested"],
            "max_runtime": job["max_runtime_s"] if job["max_runtime_given"] else None,
            "expected_runtime": job["expected_runtime_s"],
            "deadline": iso(job["deadline"]),
        }
        asked = {key: value for key, value in changes.items() if key in current}
        request, warnings = validate_request({**current, **asked}, self._limits(), now)
        if "max_runtime" not in asked and not job["max_runtime_given"]:  # keeps the default it was given
            request = replace(request, max_runtime_s=job["max_runtime_s"])
        if "deadline" not in asked:  # to the microsecond: its text above is to the millisecond
            request = replace(request, deadline=job["deadline"])
        new: dict[str, Any] = {
            "gpus_requested": request.gpus, "max_runtime_s": request.max_runtime_s,
            "expected_runtime_s": request.expected_runtime_s, "deadline": request.deadline,
            "max_runtime_given": int(request.max_runtime_given),
        }  # fmt: skip
        if "name" in changes:
            new["name"] = validate_text(changes, "name")
            if not new["name"]:
                raise InvalidRequest("name: give the job a name that is not empty.")
        if "team" in changes:
            new["team"] = validate_text(changes, "team")
        if "after" in changes:
            new["after_jobs"] = self._valid_after(caller, changes["after"], changing=job["id"])
        fields = {column: value for column, value in new.items() if value != job[column]}
        changed = [_change(column, job[column], value) for column, value in fields.items()]
        return Revision(request, fields, [c for c in changed if c], warnings if asked else [])

    def _limits(self, kernels: Sequence[str] = ()) -> Limits:
        return Limits(
            self._settings.inventory, self._settings.default_max_runtime_s, list(kernels),
            container=self._backend.container_limits if self._backend is not None else None,
            max_gpus_per_user=self._settings.max_gpus_per_user,
        )  # fmt: skip

    def _valid_after(self, caller: Caller, value, changing: str | None = None) -> list[str]:
        """The jobs a submit (or the change of queued job ``changing``) asks to run after: each
        one the caller may see, none ended without succeeding, none that waits for ``changing``."""
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
            if job_id == changing:
                raise InvalidRequest(f"after: job {changing} cannot run after itself. Leave it out.")
            if changing is not None and self._waits_for(job_id, changing):
                raise InvalidRequest(
                    f"after: job {changing} cannot run after job {job_id} ({job['name']}), which waits for it: "
                    "neither would ever start. Leave it out."
                )
        return after

    def _waits_for(self, job_id: str, other: str) -> bool:
        """Whether queued job ``job_id`` waits for ``other``, directly or through the jobs it runs after."""
        seen: set[str] = set()
        todo = [job_id]
        while todo:
            current = todo.pop()
            if current == other:
                return True
            if current in seen:
                continue
            seen.add(current)
            job = self._store.get(current)
            if job is not None and job["state"] == JobState.QUEUED.value:
                todo.extend(job["after_jobs"])
        return False

    def _check_queued_limit(self, caller: Caller) -> None:
        waiting = self._store.count((JobState.QUEUED.value,), owner=caller.name)
        if waiting >= self._settings.max_queued_per_user:
            raise E31Error(
                f"You have {waiting} jobs waiting, the most this queue takes from one user "
                "(c.E31.max_queued_per_user). Submit again when some have started, or cancel some.",
                status=429,
            )


def _change(column: str, old, new) -> str:
    """One change as people read it ("" for bookkeeping that goes with another)."""
    if column == "max_runtime_given":
        return ""
    label = {
        "gpus_requested": "gpus", "max_runtime_s": "max_runtime", "expected_runtime_s": "expected_runtime",
        "after_jobs": "after",
    }  # fmt: skip
    return f"{label.get(column, column)} {_shown(column, old)} -> {_shown(column, new)}"


def _shown(column: str, value) -> str | None:
    if value is None or value == "" or value == []:
        return "none"
    if column == "after_jobs":
        return ", ".join(value)
    if column == "deadline":  # UTC: the history is read from any time zone
        return format_moment(iso(value), utc=True)
    if column.endswith("_runtime_s"):
        return format_seconds(value)
    return str(value)
