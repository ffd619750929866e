"""The SQLite store on its own: a file made by an older e31 is brought up to date in place."""

from __future__ import annotations

import sqlite3

import pytest

from e31_jupyter.core.states import Cause
from e31_jupyter.service.store import _SCHEMA, Store


def test_a_store_from_before_dependencies_gains_the_column_and_keeps_its_jobs(tmp_path):
    path = tmp_path / "e31.sqlite"
    added_later = ("after_jobs", "attempts", "returned", "gpu_use", "used_gpu_s")
    lines = [line for line in _SCHEMA.splitlines() if not any(column in line for column in added_later)]
    old_schema = "\n".join(lines).replace("result TEXT NOT NULL DEFAULT '{}',", "result TEXT NOT NULL DEFAULT '{}'")
    assert "after_jobs" not in old_schema
    with sqlite3.connect(path) as db:
        db.executescript(old_schema)
        db.execute(
            "INSERT INTO jobs (id, owner, name, state, gpus_requested, max_runtime_s, submitted_at)"
            " VALUES ('old', 'ann', 'old', 'succeeded', 1, 60, 1.0)"
        )
    store, again = Store(path), Store(path)  # two servers starting on it: the second finds it done
    assert store.get("old")["after_jobs"] == [] and store.states(["old", "gone"]) == {"old": "succeeded"}
    assert store.get("old").attempts == []  # a column added later again
    assert (store.get("old").gpu_use, store.get("old").returned, store.get("old").used_gpu_s) == ({}, [], None)
    assert [row["after_jobs"] for row in again.queued_requests()] == []
    store.close()
    again.close()


def _queued(job_id: str, submitted_at: float = 1.0) -> dict:
    return {
        "id": job_id, "owner": "ann", "name": job_id, "team": "", "state": "queued", "gpus_requested": 1,
        "max_runtime_s": 60.0, "expected_runtime_s": None, "max_runtime_given": 0, "deadline": None,
        "submitted_at": submitted_at,
    }  # fmt: skip


def test_the_queue_is_read_again_only_after_a_write_by_this_server_or_another(tmp_path):
    """A scheduler reads the queue every pass: with nothing written since, the last read stands;
    after a write, what changed is read, whoever wrote it and however it changed."""
    store, other = Store(tmp_path / "e31.sqlite"), Store(tmp_path / "e31.sqlite")
    store.insert_job(_queued("a"), "submitted")
    first = store.queued_requests()
    assert [r["id"] for r in first] == ["a"] and store.queued_requests() is first

    store.insert_job(_queued("b", 2.0), "submitted")  # this server's write
    assert sorted(r["id"] for r in store.queued_requests()) == ["a", "b"]

    other.transition(
        "a", ("queued",), "cancelled", "cancelled", 3.0, cause=Cause.USER, finished_at=3.0
    )  # another server's
    assert [r["id"] for r in store.queued_requests()] == ["b"]
    other.transition(
        "b", ("queued",), "queued", "changed", 4.0, cause=Cause.USER, max_runtime_s=120.0
    )  # a request changed in place
    assert [(r["id"], r["max_runtime_s"]) for r in store.queued_requests()] == [("b", 120.0)]
    other.update("b", reason="noted")  # a write that is not a change of state
    assert [(r["id"], r["max_runtime_s"]) for r in store.queued_requests()] == [("b", 120.0)]

    other.insert_job(_queued("c", 5.0), "submitted")
    other.delete_job("b")  # forgotten, its history with it: the count tells
    assert [r["id"] for r in store.queued_requests()] == ["c"]
    fresh = Store(tmp_path / "e31.sqlite")
    assert [tuple(r) for r in store.queued_requests()] == [tuple(r) for r in fresh.queued_requests()]
    for each in (store, other, fresh):
        each.close()


def test_a_request_or_state_cannot_change_without_a_transition(tmp_path):
    store = Store(tmp_path / "e31.sqlite")
    store.insert_job(_queued("a"), "submitted")
    for fields in ({"max_runtime_s": 5.0}, {"state": "running"}, {"deadline": 9.0, "reason": "x"}):
        with pytest.raises(ValueError, match="through transition"):
            store.update("a", **fields)
    assert store.get("a")["max_runtime_s"] == 60.0 and store.get("a")["state"] == "queued"
    store.close()
