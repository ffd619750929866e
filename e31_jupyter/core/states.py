"""A job's life cycle, as data: its states, what may move it from one to another, and why a
running job was asked to stop.

    queued ──(scheduler)──> running ──(process end)──> succeeded | failed | cancelled
      │ ▲ ▲                   ├──(restart: started again, never having run)──> running
      │ │ └──(restart: its process lost; it has a checkpoint)──┘
      │ └────(user: resumed from its checkpoint)──── failed | suspended <──(process end, as asked)── running
      ├──(user: request changed)──> queued
      ├──(user)──> cancelled
      └──(scheduler)──> expired

``TRANSITIONS`` is the whole table; the store refuses any move that is not in it
(``Store.transition``), and ``docs/ARCHITECTURE.md``'s diagram is checked against it. Every
move is stored with its time, cause and reason. Pure: no I/O.
"""

from __future__ import annotations

from enum import Enum

from e31_jupyter.core.errors import E31Error


class JobState(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    SUSPENDED = "suspended"  # stopped at a cell's end with a checkpoint; out of line until resumed

    def __str__(self) -> str:
        return self.value

    @property
    def is_final(self) -> bool:
        return self not in (JobState.QUEUED, JobState.RUNNING)


class Cause(str, Enum):
    """What moved a job: a person's request, the scheduler (e31's, or a cluster's), the end of the
    job's process, or a server starting again after a stop."""

    USER = "user"
    SCHEDULER = "scheduler"
    PROCESS_END = "process end"
    RESTART = "restart"

    def __str__(self) -> str:
        return self.value


class StopRequest(str, Enum):
    """Why the scheduler is stopping a running job (stored with it until its process ends)."""

    CANCEL = "cancel"
    TIMEOUT = "timeout"
    SUSPEND = "suspend"  # finish the cell, save a checkpoint, give the GPUs back (e31 suspend)
    MAKE_ROOM = "make room"  # a suspend the queue asked, for a job that cannot wait (stop_by): back in line after


SUSPENDS = (StopRequest.SUSPEND, StopRequest.MAKE_ROOM)  # the stop requests that end in a suspend


Q, R = JobState.QUEUED, JobState.RUNNING
S, F, C, X, P = JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.EXPIRED, JobState.SUSPENDED
USER, SCHEDULER, PROCESS_END, RESTART = Cause.USER, Cause.SCHEDULER, Cause.PROCESS_END, Cause.RESTART

# (from, to) -> the causes that may make that move.
TRANSITIONS: dict[tuple[JobState, JobState], frozenset[Cause]] = {
    (Q, Q): frozenset({USER}),  # its request, name or team changed in place (e31 update)
    (Q, R): frozenset({SCHEDULER}),  # granted its GPUs (or started by the cluster)
    (Q, C): frozenset({USER, SCHEDULER}),  # cancelled while it waited (or withdrawn by a cluster's admin)
    (Q, X): frozenset({SCHEDULER}),  # its deadline became hopeless, or the jobs it waited for failed
    (Q, F): frozenset({RESTART, PROCESS_END}),  # lost while handed to a cluster; or the cluster ended it
    (Q, S): frozenset({PROCESS_END}),  # a cluster ran it between two looks
    (R, R): frozenset({RESTART}),  # recorded as running, its process never began: started now
    (R, Q): frozenset({RESTART}),  # its process lost while no server watched: resumes from its checkpoint
    (R, S): frozenset({PROCESS_END}),
    (R, F): frozenset({PROCESS_END}),
    (R, C): frozenset({PROCESS_END}),  # its process ended after the stop a user asked for
    (R, P): frozenset({PROCESS_END}),  # it stopped at a cell's end, as asked (e31 suspend), its checkpoint saved
    (P, Q): frozenset({USER, SCHEDULER}),  # resumed (e31 resume), or suspended by the queue: back in line
    (P, C): frozenset({USER}),  # cancelled while suspended: it will not be resumed
    (F, Q): frozenset({USER}),  # resumed from its checkpoint (e31 resume): back in line, same id
    (S, S): frozenset({USER}),  # its files were deleted; its state stays
    (F, F): frozenset({USER}),
    (C, C): frozenset({USER}),
    (X, X): frozenset({USER}),
    (P, P): frozenset({USER}),
}

FINAL_STATES: tuple[JobState, ...] = tuple(s for s in JobState if s.is_final)
ACTIVE_STATES: tuple[JobState, ...] = (Q, R)
RESUMABLE: tuple[JobState, ...] = (F, P)  # the states a job with a checkpoint may be resumed from


class InvalidTransition(E31Error):
    """A move the life cycle does not have: a bug in e31, never the user's doing."""

    status = 500


def check_transition(from_state: str, to_state: str, cause: Cause) -> None:
    """Refuse a move that is not in ``TRANSITIONS``, naming both states and the cause."""
    causes = TRANSITIONS.get((JobState(from_state), JobState(to_state)))
    if causes is None or cause not in causes:
        allowed = sorted(str(to) for (frm, to), why in TRANSITIONS.items() if frm == from_state and cause in why)
        raise InvalidTransition(
            f"A job cannot go from {from_state} to {to_state} by {cause}: "
            f"from {from_state}, {cause} may only lead to {', '.join(allowed) or 'nothing'}."
        )


def diagram() -> str:
    """The life cycle as a Mermaid state diagram, made from ``TRANSITIONS`` (docs/ARCHITECTURE.md
    shows it; a test checks that the two agree)."""
    lines = ["stateDiagram-v2", f"    [*] --> {JobState.QUEUED}: submit (user)"]
    for (frm, to), causes in TRANSITIONS.items():
        lines.append(f"    {frm} --> {to}: {', '.join(sorted(str(c) for c in causes))}")
    lines += [f"    {state} --> [*]" for state in FINAL_STATES]
    return "\n".join(lines)
