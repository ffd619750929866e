"""Where a job stands with the jobs it runs after: pure, on hand-made states."""

from __future__ import annotations

import pytest

from e31_jupyter.core.after import MAX_AFTER, broken_reason, standing, validate_after
from e31_jupyter.core.errors import InvalidRequest


def test_a_job_is_ready_once_every_job_it_names_has_succeeded():
    assert standing([], {}).ready
    assert standing(["a", "b"], {"a": "succeeded", "b": "succeeded"}).ready
    waiting = standing(["a", "b", "c"], {"a": "succeeded", "b": "running", "c": "queued"})
    assert not waiting.ready and waiting.waiting_for == ["b", "c"] and waiting.broken == []


def test_one_that_ended_otherwise_or_is_gone_breaks_it():
    where = standing(["a", "b", "c"], {"a": "failed", "b": "queued"})
    assert where.broken == [("a", "failed"), ("c", "deleted")] and where.waiting_for == ["b"]
    assert broken_reason(where.broken) == (
        "nothing to run after: a failed, c deleted, and this job was to run only once they had succeeded"
    )
    assert broken_reason([("a", "cancelled")]).endswith("only once it had succeeded")


def test_after_is_one_id_or_a_list_of_them_each_once():
    assert validate_after(None) == [] and validate_after([]) == []
    assert validate_after(" a ") == ["a"] and validate_after(["a", "b", "a"]) == ["a", "b"]
    for bad in ([1], [""], {"a": 1}, "  "):
        with pytest.raises(InvalidRequest, match="job id"):
            validate_after(bad)
    with pytest.raises(InvalidRequest, match=f"at most {MAX_AFTER}"):
        validate_after([f"j{i}" for i in range(MAX_AFTER + 1)])
