"""The SQLite store on its own: a file made by an older e31 is brought up to date in place."""

from __future__ import annotations

import sqlite3

from e31_jupyter.store import _SCHEMA, Store


def test_a_store_from_before_dependencies_gains_the_column_and_keeps_its_jobs(tmp_path):
    path = tmp_path / "e31.sqlite"
    lines = [line for line in _SCHEMA.splitlines() if "after_jobs" not in line]
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
    assert [row["after_jobs"] for row in again.queued_requests()] == []
    store.close()
    again.close()
