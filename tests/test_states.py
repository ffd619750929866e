"""A job's life cycle is one table (core/states.py): the store refuses every move outside it, the
architecture page draws exactly it, and no state is spelled out anywhere else in the package."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest

from e31_jupyter.core.states import TRANSITIONS, Cause, InvalidTransition, JobState, diagram
from e31_jupyter.service.store import Store

ROOT = Path(__file__).resolve().parents[1]


def _job(job_id: str, state: JobState) -> dict:
    return {
        "id": job_id, "owner": "ann", "name": job_id, "team": "", "state": state, "gpus_requested": 0,
        "max_runtime_s": 60.0, "expected_runtime_s": None, "max_runtime_given": 0, "deadline": None,
        "submitted_at": 1.0,
    }  # fmt: skip


@pytest.mark.parametrize("frm,to", list(itertools.product(JobState, JobState)), ids=lambda s: str(s))
def test_the_store_makes_exactly_the_moves_of_the_table(tmp_path, frm, to):
    store = Store(tmp_path / "e31.sqlite")
    for n, cause in enumerate(Cause):
        job_id = f"j{n}"
        store.insert_job(_job(job_id, frm), "seeded")
        if cause in TRANSITIONS.get((frm, to), ()):
            assert store.transition(job_id, (frm,), to, "moved", 2.0, cause=cause)
            assert store.get(job_id).state == to
            last = store.transitions(job_id)[-1]
            assert (last["from"], last["to"]) == (frm, to)
        else:
            with pytest.raises(InvalidTransition, match=f"from {frm} to {to} by {cause}"):
                store.transition(job_id, (frm,), to, "moved", 2.0, cause=cause)
            assert store.get(job_id).state == frm  # refused whole: nothing changed, nothing recorded
            assert len(store.transitions(job_id)) == 1
    store.close()


def test_a_job_in_another_state_than_expected_is_left_alone(tmp_path):
    store = Store(tmp_path / "e31.sqlite")
    store.insert_job(_job("a", JobState.SUCCEEDED), "seeded")
    assert not store.transition("a", (JobState.QUEUED,), JobState.RUNNING, "start", 2.0, cause=Cause.SCHEDULER)
    store.close()


def test_every_state_can_be_reached_and_every_active_one_left():
    reached = {to for _, to in TRANSITIONS} | {JobState.QUEUED}
    assert reached == set(JobState)
    for state in (JobState.QUEUED, JobState.RUNNING):
        assert any(frm == state and to.is_final for frm, to in TRANSITIONS)


def test_the_architecture_page_draws_the_table():
    page = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    drawn = re.search(r"```mermaid\n(.*?)\n```", page, re.S)
    assert drawn is not None, "docs/ARCHITECTURE.md has no mermaid diagram"
    assert drawn.group(1) == diagram(), (
        "regenerate it: python -c 'from e31_jupyter.core.states import diagram; print(diagram())'"
    )


# Strings that are another system's state, not a job's: Docker's container status.
NOT_OURS = {("execution/backends/docker.py", "running")}


def _dict_keys(tree: ast.AST) -> set[int]:
    """The string constants that are keys of a dict display: the API's field names (the GPU pool's
    count of "running" jobs), not states."""
    return {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys if k is not None}


def test_no_state_name_is_spelled_out_outside_the_states_module():
    names = {s.value for s in JobState}
    found = []
    for path in sorted((ROOT / "e31_jupyter").rglob("*.py")):
        where = str(path.relative_to(ROOT / "e31_jupyter"))
        if where == "core/states.py":
            continue
        tree = ast.parse(path.read_text())
        keys = _dict_keys(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in keys:
                hits = {n for n in names if node.value == n or f"'{n}'" in node.value}
                found += [f"{where}:{node.lineno}: {n}" for n in hits if (where, n) not in NOT_OURS]
    assert found == []
