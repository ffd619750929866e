"""``JobRecord``: one job as the store holds it, typed and frozen, with its request as a property
(the one mapping from a row to a ``Request``).

Read-only key access (``job["state"]``) also works, for the views that turn records into the
API's JSON and for rows not yet recorded (a checked submit); new code uses the attributes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from e31_jupyter.core.job import Request
from e31_jupyter.core.states import JobState, StopRequest

_JSON: dict[str, Any] = {
    "granted": [],
    "spec": {},
    "result": {},
    "after_jobs": [],
    "attempts": [],
    "returned": [],
    "gpu_use": {},
}  # columns stored as JSON, and their empty value


@dataclass(frozen=True)
class JobRecord(Mapping[str, Any]):
    id: str
    owner: str
    name: str = ""
    team: str = ""
    state: JobState = JobState.QUEUED
    reason: str = ""
    gpus_requested: int = 0
    max_runtime_s: float = 0.0
    expected_runtime_s: float | None = None
    max_runtime_given: bool = False
    deadline: float | None = None
    submitted_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    released_at: float | None = None  # its GPUs given back (its kernel ended); it may still be running
    granted: list[str] = field(default_factory=list)
    handle: dict | None = None  # the backend's, once it has started (or taken) the job
    stop_requested: StopRequest | None = None
    stop_by: str = ""  # who asked to cancel it
    suspended_for: str = ""  # the job the queue last suspended it to make room for: it never expires
    fingerprint: str = ""
    position: int | None = None  # place in a cluster's queue
    node: str | None = None  # the cluster node it runs on
    spec: dict = field(default_factory=dict)
    result: dict = field(default_factory=dict)
    after_jobs: list[str] = field(default_factory=list)
    attempts: list[dict] = field(default_factory=list)  # a resumed job's earlier runs (meter.attempt)
    returned: list[dict] = field(default_factory=list)  # GPUs given back while it ran: {"device", "at"}
    gpu_use: dict = field(default_factory=dict)  # what its GPUs did (core/gpu_use.py); {} before any reading
    used_gpu_s: float | None = None  # GPU-seconds used, utilisation-weighted; None: not measured
    seq: int | None = None  # with a read of ended jobs: the transition that ended it

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> JobRecord:
        """A record from a store row (all columns, or some: the others take their defaults)."""
        values = {name: row[name] for name in row.keys() if name in _FIELDS}
        for column, empty in _JSON.items():
            if isinstance(values.get(column), str):
                values[column] = json.loads(values[column]) if values[column] else empty
        if isinstance(values.get("handle"), str):
            values["handle"] = json.loads(values["handle"]) if values["handle"] else None
        if "state" in values:
            values["state"] = JobState(values["state"])
        values["stop_requested"] = StopRequest(values["stop_requested"]) if values.get("stop_requested") else None
        values["max_runtime_given"] = bool(values.get("max_runtime_given", False))
        return cls(**values)

    @property
    def request(self) -> Request:
        """What the job asks of the queue."""
        return Request(
            gpus=self.gpus_requested, max_runtime_s=self.max_runtime_s, expected_runtime_s=self.expected_runtime_s,
            deadline=self.deadline, max_runtime_given=self.max_runtime_given,
        )  # fmt: skip

    def row(self) -> dict[str, Any]:
        """The record as the store's columns hold it (to record a copy: ``Store.insert_job``)."""
        values = {name: getattr(self, name) for name in _COLUMNS}
        values["handle"] = json.dumps(self.handle) if self.handle is not None else None
        values["stop_requested"] = self.stop_requested.value if self.stop_requested else ""
        values["max_runtime_given"] = int(self.max_runtime_given)
        return values

    @property
    def is_active(self) -> bool:
        return not self.state.is_final

    def __getitem__(self, key: str) -> Any:
        if key not in _FIELDS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_FIELDS)

    def __len__(self) -> int:
        return len(_FIELDS)


_FIELDS = tuple(f.name for f in fields(JobRecord))
_COLUMNS = tuple(name for name in _FIELDS if name != "seq")  # seq comes with a read of ended jobs
