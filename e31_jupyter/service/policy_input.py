"""What the scheduler learns from the store's past, and the snapshot a policy sees.

A policy is pure (``policy.py``); this turns the store's rows into its nouns: queued jobs into
``Pending``, running ones into ``Running``, and the past into fair-share usage, run times of
finished jobs and the recent demand of short jobs that could not wait.

The past is read incrementally, whichever server wrote it: jobs that ended are taken from the
store's log of transitions after the last one seen, jobs submitted from the rows recorded after
the last one seen. A scheduling pass therefore reads only what changed since the one before,
not weeks of finished jobs. After a restart the first pass reads the last
HISTORY_HALF_LIVES fair-share half-lives once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from e31_jupyter.core import gpu_use, meter, policy
from e31_jupyter.core.after import Standing, standing
from e31_jupyter.core.fairshare import FAIR_SHARE_HALF_LIFE_S, Usage
from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.runtimes import RuntimeModel, UrgentDemand
from e31_jupyter.core.states import RESUMABLE, JobState
from e31_jupyter.service.job_record import JobRecord
from e31_jupyter.service.store import Store

HISTORY_HALF_LIVES = 4  # how far back a restarted scheduler reads: usage older weighs 1/16 or less


def pending(job) -> policy.Pending:
    """A queued job as the policy sees it (a row with at least the store's REQUEST_COLUMNS). A
    resumed one has done the time of its earlier runs (``Pending.done_s``): it goes on from its
    last checkpoint, and what each did after its last checkpoint is counted too, though it is done
    again (the store does not know when they saved one)."""
    record = job if isinstance(job, JobRecord) else JobRecord.from_row(job)
    request = record.request
    return policy.Pending(
        job["id"], request.gpus, job["submitted_at"], request.max_runtime_s,
        request.runtime_estimate(), request.deadline, team(job), job["owner"], bool(record.suspended_for),
        meter.earlier_runs_s(record),
    )  # fmt: skip


def standing_of(store: Store, job) -> Standing:
    """Where one job (a store row or a record) stands with the jobs it runs after (--after)."""
    after = job["after_jobs"]
    return standing(after, store.states(after)) if after else Standing()


class PendingJobs:
    """Queued jobs (store rows) as the policy sees them, each worked out once while its row stays
    the same: a pass reads the whole queue, and most of it is as it was the pass before. The same
    row gives the same ``Pending``, which is how a line (``Line.follow``) knows a job is unchanged."""

    def __init__(self):
        self._made: dict[tuple, policy.Pending] = {}  # a row's values -> the job, for rows of the last read
        self._last: tuple[object, list[policy.Pending]] = (None, [])  # the rows last asked about, and their jobs

    def of(self, rows: list) -> list[policy.Pending]:
        """The jobs of ``rows``, in their order; what is kept is the jobs of these rows only. The
        store answers with the same list while nothing was written (``Store.queued_requests``)."""
        if rows is self._last[0]:
            return self._last[1]
        made, self._made = self._made, {}
        for row in rows:
            values = tuple(row)
            job = made.get(values)
            self._made[values] = pending(row) if job is None else job
        self._last = (rows, list(self._made.values()))
        return self._last[1]


def running(job: Mapping[str, Any]) -> policy.Running:
    """A running job as the policy sees it: resumed, with the time of its earlier runs done, as
    ``pending``."""
    waited = pending(job)
    return policy.Running(
        job["id"],
        len(job["granted"]),
        job["started_at"],
        waited.max_runtime,
        (0,),
        waited.estimate,
        waited.team,
        waited.owner,
        done_s=waited.done_s,
        resumed=bool(job["attempts"]),
    )


def team(job) -> str:
    """Who fair-share charges: the job's team, else its owner."""
    return job["team"] or job["owner"]


class History:
    """Fair-share usage of ended jobs, run times of jobs that succeeded, and urgent short jobs' demand,
    each brought up to date from the store when asked."""

    def __init__(
        self, store: Store, machine_gpus: int, long_share: float | None = None, max_gpus_per_owner: int | None = None
    ):
        self.store = store
        self.long_share = long_share
        self.max_gpus_per_owner = max_gpus_per_owner
        self.usage: Usage | None = None  # made at the first read
        self.runtimes = RuntimeModel()
        self.demand = UrgentDemand(machine_gpus=machine_gpus)
        self._ended_seq = 0  # the last transition to an end state seen
        self._last_end: dict[str, float] = {}  # team -> when its latest job ended
        # GPU-seconds counted so far of jobs that may run again (failed or suspended: resumable),
        # so that a resumed job's earlier runs count once.
        self._counted: dict[str, float] = {}
        self._submitted_row = 0  # the last job recorded that the demand has seen (rowid)

    def snapshot(
        self,
        now: float,
        inventory: list[str],
        running_jobs: Sequence[Mapping[str, Any]],
        busy_outside: Mapping[str, str] | None = None,
    ) -> policy.Snapshot:
        """The world as the policy sees it on this machine (one machine of ``inventory``'s GPUs)
        with ``running_jobs`` holding theirs, and ``busy_outside`` (device -> why) not to be
        handed out."""
        self._read_ended(now)
        self._read_submitted(now)
        busy_outside = busy_outside or {}
        free = len(inventory) - sum(len(j["granted"]) for j in running_jobs) - len(busy_outside)
        return policy.Snapshot(
            now,
            Cluster.one_machine(len(inventory), free),
            [running(j) for j in running_jobs],
            self._usage_at(now, running_jobs),
            self.runtimes,
            self.demand,
            self.long_share,
            self.max_gpus_per_owner,
            outside_gpus=len(busy_outside),
            outside_use=gpu_use.outside_note(busy_outside),
        )

    def _usage_at(self, now: float, running_jobs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """Each team's decayed GPU-seconds: those of ended jobs, and running jobs' so far. A team
        whose last job ended more than HISTORY_HALF_LIVES half-lives ago no longer counts toward
        the equal shares."""
        gone = now - HISTORY_HALF_LIVES * FAIR_SHARE_HALF_LIFE_S
        assert self.usage is not None  # read first (_read_ended)
        usage = {t: used for t, used in self.usage.at(now).items() if self._last_end.get(t, now) > gone}
        for job in running_jobs:
            usage[team(job)] = (
                usage.get(team(job), 0.0) + meter.gpu_seconds(job, now) - self._counted.get(job["id"], 0.0)
            )
        return usage

    def _read_ended(self, now: float) -> None:
        if self.usage is None:  # the first read: only the recent past, from the start of the log
            self.usage = Usage(t0=now)
            self._ended_seq = self.store.last_transition()
            jobs = self.store.ended_after(0, since=now - HISTORY_HALF_LIVES * FAIR_SHARE_HALF_LIFE_S)
        else:
            jobs = self.store.ended_after(self._ended_seq)
        for job in jobs:
            self._ended_seq = max(self._ended_seq, job["seq"])
            ended_at = job["finished_at"] or now  # None: resumed since, and running again
            self.usage.ended(team(job), self._not_counted_yet(job, now), ended_at)
            self._last_end[team(job)] = max(self._last_end.get(team(job), 0.0), ended_at)
            if job["state"] == JobState.SUCCEEDED.value:
                window = job["deadline"] - job["submitted_at"] if job["deadline"] is not None else None
                took = job["finished_at"] - job["started_at"]
                self.runtimes.observe(team(job), pending(job).estimate, took, deadline_window_s=window)

    def _not_counted_yet(self, job: Mapping[str, Any], now: float) -> float:
        """The GPU-seconds of an ended job not counted yet: all of them, but for a resumed job's
        runs counted when they ended."""
        seconds = meter.gpu_seconds(job, now)
        counted = self._counted.pop(job["id"], 0.0)
        if job["state"] in RESUMABLE or job["attempts"]:
            self._counted[job["id"]] = seconds
        return max(0.0, seconds - counted)

    def _read_submitted(self, now: float) -> None:
        for job in self.store.submitted_after(self._submitted_row, now - self.demand.span_s):
            self.demand.submitted(job["submitted_at"], job["gpus_requested"], pending(job).estimate, job["deadline"])
            self._submitted_row = job["row"]
