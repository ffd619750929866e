"""Jobs that run after others: ``after`` names earlier jobs that must all succeed first.

A job with an ``after`` waits in the queue, out of the policy's line (no place in it; the
forecast expects it to start once the last of them is expected to end), until every job it names
has succeeded; then it joins the line like any other. When one
of them ends any other way, there is nothing to run after: the job expires, saying which and
why. Like Slurm's ``--dependency=afterok``. Pure: the queue reads the states and acts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.core.states import FINAL_STATES, JobState

MAX_AFTER = 100  # jobs one job may wait for
SUCCEEDED = JobState.SUCCEEDED.value
# A suspended job is to be resumed: the jobs after it wait on. One that failed may be resumed too,
# but nothing says it will be: they expire, as they always did.
ENDED_OTHERWISE = tuple(state for state in FINAL_STATES if state not in (SUCCEEDED, JobState.SUSPENDED))


@dataclass
class Standing:
    """Where a job stands with the jobs it runs after."""

    waiting_for: list[str] = field(default_factory=list)  # not ended yet
    broken: list[tuple[str, str]] = field(default_factory=list)  # (job id, how it ended) for the unsucceeded

    @property
    def ready(self) -> bool:
        return not self.waiting_for and not self.broken


def standing(after: Iterable[str], states: dict[str, str]) -> Standing:
    """``states``: job id -> state, for at least the jobs of ``after``; a job missing there was
    deleted, which counts as not succeeded."""
    found = Standing()
    for job_id in after:
        state = states.get(job_id, "deleted")
        if state == SUCCEEDED:
            continue
        if state in ENDED_OTHERWISE or state == "deleted":
            found.broken.append((job_id, state))
        else:
            found.waiting_for.append(job_id)
    return found


def broken_reason(broken: list[tuple[str, str]]) -> str:
    """Why a job that waited for others expires."""
    ended = ", ".join(f"{job_id} {state}" for job_id, state in broken)
    them = "it" if len(broken) == 1 else "they"
    return f"nothing to run after: {ended}, and this job was to run only once {them} had succeeded"


def validate_after(value) -> list[str]:
    """``after`` as given: a job id or a list of them, each once."""
    if value is None or value == []:
        return []
    ids = [value] if isinstance(value, str) else value
    if not isinstance(ids, list) or not all(isinstance(i, str) and i.strip() for i in ids):
        raise InvalidRequest('after must be a job id or a list of job ids, e.g. ["261201-b90c4400"].')
    if len(ids) > MAX_AFTER:
        raise InvalidRequest(f"after names {len(ids)} jobs; a job may run after at most {MAX_AFTER}.")
    return list(dict.fromkeys(i.strip() for i in ids))
