"""SQLite (WAL) record of jobs and their state changes; the only module that writes SQL.

Several Jupyter servers may open the same file: every write is one short transaction, and a
state change only happens from the state the caller expects, so two writers cannot both win.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from e31_jupyter.core.states import FINAL_STATES, Cause, JobState, check_transition
from e31_jupyter.service.job_record import JobRecord

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    team TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    gpus_requested INTEGER NOT NULL,
    max_runtime_s REAL NOT NULL,
    expected_runtime_s REAL,
    max_runtime_given INTEGER NOT NULL DEFAULT 0,
    deadline REAL,
    submitted_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    released_at REAL,  -- when its kernel ended and its GPUs went back, before its reports were made
    granted TEXT NOT NULL DEFAULT '[]',
    handle TEXT,
    stop_requested TEXT NOT NULL DEFAULT '',  -- a StopRequest (cancel, timeout) while one is pending
    stop_by TEXT NOT NULL DEFAULT '',  -- who asked to cancel it
    suspended_for TEXT NOT NULL DEFAULT '',  -- the job the queue last suspended it to make room for
    fingerprint TEXT NOT NULL DEFAULT '',
    position INTEGER,  -- place in a cluster scheduler's queue (cluster_scheduler.py)
    node TEXT,  -- the cluster node a job runs on
    spec TEXT NOT NULL DEFAULT '{}',  -- what the job declared (its notebook, parameters, outputs)
    result TEXT NOT NULL DEFAULT '{}',  -- what it handed back, in short (files, values, progress)
    after_jobs TEXT NOT NULL DEFAULT '[]',  -- jobs it runs after (dependencies.py)
    attempts TEXT NOT NULL DEFAULT '[]',  -- a resumed job's earlier runs: their holds and ends (meter.py)
    returned TEXT NOT NULL DEFAULT '[]',  -- granted GPUs given back while it ran (idle): device, at
    gpu_use TEXT NOT NULL DEFAULT '{}',  -- what its GPUs did (core/gpu_use.py); {} before any reading
    used_gpu_s REAL  -- GPU-seconds used, utilisation-weighted (gpu_use's, for the meter); NULL: not measured
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, submitted_at, id);
CREATE INDEX IF NOT EXISTS jobs_submitted ON jobs(submitted_at, id);
CREATE INDEX IF NOT EXISTS jobs_owner ON jobs(owner, submitted_at);
CREATE INDEX IF NOT EXISTS jobs_fingerprint ON jobs(fingerprint);
CREATE TABLE IF NOT EXISTS transitions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL REFERENCES jobs(id),
    at REAL NOT NULL,
    from_state TEXT,
    to_state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    cause TEXT NOT NULL DEFAULT ''  -- a states.Cause: user, scheduler, process end, restart
);
CREATE INDEX IF NOT EXISTS transitions_job ON transitions(job_id, seq);
"""


log = logging.getLogger("e31")

_JSON_COLUMNS = ("granted", "spec", "result", "after_jobs", "attempts", "returned", "gpu_use")
REQUEST_COLUMNS = (
    "id", "owner", "team", "gpus_requested", "max_runtime_s", "expected_runtime_s",
    "max_runtime_given", "deadline", "submitted_at", "after_jobs", "suspended_for", "attempts",
)  # fmt: skip
# Columns added since the first release: (table, name, definition), added to an older file at start.
_ADDED_COLUMNS = (
    ("jobs", "after_jobs", "TEXT NOT NULL DEFAULT '[]'"),
    ("jobs", "stop_by", "TEXT NOT NULL DEFAULT ''"),
    ("transitions", "cause", "TEXT NOT NULL DEFAULT ''"),
    ("jobs", "released_at", "REAL"),
    ("jobs", "attempts", "TEXT NOT NULL DEFAULT '[]'"),
    ("jobs", "returned", "TEXT NOT NULL DEFAULT '[]'"),
    ("jobs", "gpu_use", "TEXT NOT NULL DEFAULT '{}'"),
    ("jobs", "used_gpu_s", "REAL"),
    ("jobs", "suspended_for", "TEXT NOT NULL DEFAULT ''"),
)
# What scheduling, the meter and the pool need of a job: no spec or result to decode.
BRIEF_COLUMNS = (
    "id", "owner", "name", "team", "state", "gpus_requested", "max_runtime_s", "expected_runtime_s",
    "max_runtime_given", "deadline", "submitted_at", "started_at", "finished_at", "released_at", "granted",
    "attempts", "returned", "used_gpu_s",
)  # fmt: skip


# The jobs that changed state after a transition (its seq), with what queued_requests keeps of them.
_QUEUED_CHANGES = (
    f"SELECT t.seq, t.job_id, j.state, {', '.join('j.' + c for c in REQUEST_COLUMNS)} FROM transitions t"
    " LEFT JOIN jobs j ON j.id = t.job_id WHERE t.seq > ? ORDER BY t.seq"
)


@dataclass
class _QueuedRows:
    """The queued jobs' rows as ``Store.queued_requests`` last read them: at which ``version``
    of the store, up to which transition (``seq``), each job's row by its id."""

    version: tuple[int, int]
    seq: int
    rows: dict[str, sqlite3.Row]

    @functools.cached_property
    def listed(self) -> list[sqlite3.Row]:
        return list(self.rows.values())


def _encoded(fields: dict) -> dict:
    return {k: json.dumps(v) if k in _JSON_COLUMNS else v for k, v in fields.items()}


def _writes(method):
    """A write that survives a full disk once: the reserve file made at start-up is given up
    so the record of what happened (a job that failed for lack of space) still lands."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.OperationalError as error:
            if "full" not in str(error) or not self._reserve.exists():
                raise
            log.critical("e31: the disk of %s is full; using the reserved space", self.path)
            self._reserve.unlink()
            return method(self, *args, **kwargs)

    return wrapper


class Store:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        _create_private(self.path)
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        with self._lock:
            self._db.executescript(_SCHEMA)  # idempotent; executescript manages its transaction
            self._add_new_columns()
        self._own_writes = 0  # transactions this server ended (counted with the lock held, once committed)
        self._queued: _QueuedRows | None = None  # the queued jobs as last read (queued_requests)
        self._reserve = self.path.with_name(self.path.name + ".reserve")
        _make_reserve(self._reserve)

    def _add_new_columns(self) -> None:
        """Bring a store made by an older e31 up to date (another server may be doing the same)."""
        for table, name, definition in _ADDED_COLUMNS:
            if name not in {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}:
                try:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {definition}")
                except sqlite3.OperationalError as error:
                    if "duplicate column" not in str(error):
                        raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _write(self):
        return _Transaction(self._db, self._lock, self._wrote)

    def _wrote(self) -> None:
        """Called with the lock held as a transaction ends: a read of ``version`` that comes
        after it sees what it wrote."""
        self._own_writes += 1

    def version(self) -> tuple[int, int]:
        """Changes whenever anyone, this server included, has written to the store; its first
        part only when another connection (another server) has."""
        with self._lock:
            return self._version()

    def _version(self) -> tuple[int, int]:
        return self._db.execute("PRAGMA data_version").fetchone()[0], self._own_writes

    # --- jobs -----------------------------------------------------------------------------

    @_writes
    def insert_job(self, job: dict, reason: str) -> None:
        row = _encoded({"granted": [], **job})
        columns = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        with self._write() as db:
            db.execute(f"INSERT INTO jobs ({columns}) VALUES ({marks})", row)
            db.execute(
                "INSERT INTO transitions (job_id, at, from_state, to_state, reason, cause) VALUES (?, ?, NULL, ?, ?, ?)",
                (job["id"], job["submitted_at"], job["state"], reason, Cause.USER),
            )

    @_writes
    def transition(
        self,
        job_id: str,
        expected: tuple[str, ...],
        to_state: str,
        reason: str,
        at: float,
        *,
        cause: Cause,
        keep_reason: bool = False,
        **fields,
    ) -> bool:
        """Move a job to ``to_state`` if it is in one of the ``expected`` states; record why and
        what caused it (in its history, and as its reason unless ``keep_reason``: a change to an
        ended job, say, keeps why it ended).

        Returns False (and changes nothing) when the job was not in an expected state; raises
        ``InvalidTransition`` for a move the life cycle does not have (``states.TRANSITIONS``)."""
        fields = _encoded(fields)
        sets = ", ".join(f"{k} = :{k}" for k in ("state", *([] if keep_reason else ["reason"]), *fields))
        marks = ", ".join(f":s{i}" for i in range(len(expected)))
        params = {"state": to_state, "reason": reason, **fields, "id": job_id}
        params.update({f"s{i}": s for i, s in enumerate(expected)})
        with self._write() as db:
            row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or row["state"] not in expected:
                return False
            check_transition(row["state"], to_state, cause)
            db.execute(f"UPDATE jobs SET {sets} WHERE id = :id AND state IN ({marks})", params)
            db.execute(
                "INSERT INTO transitions (job_id, at, from_state, to_state, reason, cause) VALUES (?, ?, ?, ?, ?, ?)",
                (job_id, at, row["state"], to_state, reason, cause),
            )
        return True

    @_writes
    def delete_job(self, job_id: str) -> None:
        """Forget a job that was never acknowledged (its hand-over to a cluster failed)."""
        with self._write() as db:
            db.execute("DELETE FROM transitions WHERE job_id = ?", (job_id,))
            db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    @_writes
    def update(self, job_id: str, *, running_since: float | None = None, **fields) -> bool:
        """Change bookkeeping fields that are not a state change (handle, stop request, ...);
        with ``running_since``, only while the job runs the hold that began then. Returns
        whether a job was changed."""
        if not fields.keys().isdisjoint({"state", *REQUEST_COLUMNS}):
            raise ValueError(
                f"{sorted(fields)}: a job's state and request change through transition(), which records why"
            )
        fields = _encoded(fields)
        sets = ", ".join(f"{k} = :{k}" for k in fields)
        held = " AND state = :running AND started_at = :running_since" if running_since is not None else ""
        params = {**fields, "id": job_id, "running": JobState.RUNNING, "running_since": running_since}
        with self._write() as db:
            changed = db.execute(f"UPDATE jobs SET {sets} WHERE id = :id{held}", params)
        return changed.rowcount > 0

    def get(self, job_id: str) -> JobRecord | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else JobRecord.from_row(row)

    def job(self, job_id: str) -> JobRecord:
        """A job known to be recorded (jobs are never forgotten once acknowledged)."""
        job = self.get(job_id)
        if job is None:
            raise KeyError(f"no job {job_id} in the store")
        return job

    def jobs(
        self,
        states: tuple[str, ...] | None = None,
        owner: str | None = None,
        fingerprint: str | None = None,
        *,
        ids: list[str] | None = None,
        before: tuple[float, str] | None = None,
        limit: int | None = None,
        brief: bool = False,
    ) -> list[JobRecord]:
        """Jobs newest first, optionally only in some states, of one owner, with one fingerprint,
        among ``ids``, submitted before ``before`` (a job's ``(submitted_at, id)``: the next page after it), at
        most ``limit`` of them; ``brief``: only BRIEF_COLUMNS."""
        where, params = _filters(states, owner, fingerprint)
        if ids is not None:
            where.append(f"id IN ({', '.join('?' * len(ids))})")
            params.extend(ids)
        if before is not None:
            where.append("(submitted_at, id) < (?, ?)")
            params.extend(before)
        columns = ", ".join(BRIEF_COLUMNS) if brief else "*"
        sql = f"SELECT {columns} FROM jobs" + (f" WHERE {' AND '.join(where)}" if where else "")
        sql += " ORDER BY submitted_at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            return [JobRecord.from_row(r) for r in self._db.execute(sql, params)]

    def holding(self) -> list[JobRecord]:
        """The running jobs that hold their GPUs still (BRIEF_COLUMNS): a job gives them back
        when its kernel ends, before its reports are made and its files collected."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(BRIEF_COLUMNS)} FROM jobs WHERE state = ? AND released_at IS NULL"
                " ORDER BY submitted_at DESC, id DESC",
                (JobState.RUNNING.value,),
            )
            return [JobRecord.from_row(r) for r in rows]

    def queued_requests(self) -> list[sqlite3.Row]:
        """What a policy needs of each queued job (REQUEST_COLUMNS) and no more. The queue can be
        long and is read on every scheduling pass, most often with nothing or little written
        since the pass before, so the rows are kept: the same list while nothing was written
        (not to be changed), else brought up to date from the jobs that changed state since
        (``transition``, a request changed in place included). They are read whole again when
        the count of queued jobs says something else changed (a job forgotten: ``delete_job``)."""
        with self._lock:
            version = self._version()
            if self._queued is None or self._queued.version != version:
                self._queued = self._queued_now(version)
            return self._queued.listed

    def _queued_now(self, version: tuple[int, int]) -> _QueuedRows:
        known = self._queued
        if known is not None:
            for change in self._db.execute(_QUEUED_CHANGES, (known.seq,)):
                known.seq = change["seq"]
                if change["state"] == JobState.QUEUED:
                    known.rows[change["id"]] = change
                else:
                    known.rows.pop(change["job_id"], None)
            if self._count((JobState.QUEUED,)) == len(known.rows):
                return _QueuedRows(version, known.seq, known.rows)
        seq = self._last_transition()  # before the rows: a change made meanwhile is applied again, no harm
        rows = self._db.execute(f"SELECT {', '.join(REQUEST_COLUMNS)} FROM jobs WHERE state = ?", (JobState.QUEUED,))
        return _QueuedRows(version, seq, {row["id"]: row for row in rows})

    def queue_positions(self) -> dict[str, int]:
        """Queued jobs' recorded places in a cluster scheduler's queue (cluster_scheduler.py)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, position FROM jobs WHERE state = ? AND position IS NOT NULL", (JobState.QUEUED,)
            )
            return {r["id"]: r["position"] for r in rows}

    def submitted_after(self, row: int, since: float) -> list[sqlite3.Row]:
        """Jobs recorded after the one at ``row`` (SQLite's rowid: the order of recording) and
        submitted after ``since``, in that order, with their ``row`` and REQUEST_COLUMNS."""
        with self._lock:
            return self._db.execute(
                f"SELECT rowid AS row, {', '.join(REQUEST_COLUMNS)} FROM jobs"
                " WHERE rowid > ? AND submitted_at > ? ORDER BY rowid",
                (row, since),
            ).fetchall()

    def ended_after(self, seq: int, since: float | None = None) -> list[JobRecord]:
        """Jobs that held GPUs and ended (a transition to an end state numbered after ``seq``, by
        any server), in the order they ended, with that transition's ``seq`` and BRIEF_COLUMNS;
        with ``since``, only those that finished after it."""
        sql = (
            f"SELECT t.seq, {', '.join('j.' + c for c in BRIEF_COLUMNS)} FROM transitions t JOIN jobs j ON j.id = t.job_id"
            f" WHERE t.seq > ? AND t.to_state IN ({', '.join('?' * len(FINAL_STATES))}) AND j.started_at IS NOT NULL"
        )
        params = [seq, *FINAL_STATES]
        if since is not None:
            sql += " AND j.finished_at > ?"
            params.append(since)
        with self._lock:
            return [JobRecord.from_row(r) for r in self._db.execute(sql + " ORDER BY t.seq", params)]

    def transitions_after(self, seq: int, limit: int = 1000) -> list[dict]:
        """State changes numbered after ``seq`` (by any server), oldest first, at most ``limit``:
        each its ``seq``, ``job_id``, the job's ``owner`` and the state it moved ``to``."""
        with self._lock:
            rows = self._db.execute(
                'SELECT t.seq, t.job_id, j.owner, t.to_state AS "to" FROM transitions t'
                " JOIN jobs j ON j.id = t.job_id WHERE t.seq > ? ORDER BY t.seq LIMIT ?",
                (seq, limit),
            )
            return [dict(row) for row in rows]

    def last_transition(self) -> int:
        """The number of the latest transition recorded (0 before any)."""
        with self._lock:
            return self._last_transition()

    def _last_transition(self) -> int:
        return self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM transitions").fetchone()[0]

    def count(self, states: tuple[str, ...] | None = None, owner: str | None = None) -> int:
        with self._lock:
            return self._count(states, owner)

    def _count(self, states: tuple[str, ...] | None = None, owner: str | None = None) -> int:
        where, params = _filters(states, owner, None)
        sql = "SELECT COUNT(*) FROM jobs" + (f" WHERE {' AND '.join(where)}" if where else "")
        return self._db.execute(sql, params).fetchone()[0]

    def ended_with_files(self, before: float, limit: int) -> list[JobRecord]:
        """Up to ``limit`` jobs that ended before ``before`` (or, never having run, were
        submitted before it) and still keep their files, oldest first."""
        marks = ", ".join("?" * len(FINAL_STATES))
        with self._lock:
            rows = self._db.execute(
                f"SELECT * FROM jobs WHERE state IN ({marks}) AND COALESCE(finished_at, submitted_at) < ?"
                " AND json_extract(result, '$.deleted') IS NULL ORDER BY COALESCE(finished_at, submitted_at) LIMIT ?",
                (*FINAL_STATES, before, limit),
            )
            return [JobRecord.from_row(r) for r in rows]

    def held_between(self, since: float, until: float) -> list[JobRecord]:
        """Jobs whose GPU hold overlaps [since, until] (BRIEF_COLUMNS): what the meter charges
        in that window. Resumed jobs come too: one of their earlier holds may overlap it."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(BRIEF_COLUMNS)} FROM jobs WHERE attempts != '[]' OR (started_at IS NOT NULL"
                " AND started_at < ? AND (COALESCE(released_at, finished_at) IS NULL"
                " OR COALESCE(released_at, finished_at) > ?))",
                (until, since),
            )
            return [JobRecord.from_row(r) for r in rows]

    def transitions(self, job_id: str) -> list[dict]:
        with self._lock:
            rows = self._db.execute(
                'SELECT at, from_state AS "from", to_state AS "to", reason FROM transitions'
                " WHERE job_id = ? ORDER BY seq",
                (job_id,),
            )
            return [dict(r) for r in rows]

    def states(self, job_ids: list[str]) -> dict[str, str]:
        """Job id -> state, for those of ``job_ids`` that exist."""
        with self._lock:
            found = {}
            for start in range(0, len(job_ids), 500):  # SQLite's limit on parameters is 999 or more
                chunk = job_ids[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT id, state FROM jobs WHERE id IN ({marks})", chunk)
                found.update({r["id"]: r["state"] for r in rows})
            return found

    def job_ids(self) -> set[str]:
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT id FROM jobs")}


def _filters(states, owner, fingerprint) -> tuple[list[str], list]:
    where, params = [], []
    if fingerprint is not None:
        where.append("fingerprint = ?")
        params.append(fingerprint)
    if states:
        where.append(f"state IN ({', '.join('?' * len(states))})")
        params.extend(states)
    if owner is not None:
        where.append("owner = ?")
        params.append(owner)
    return where, params


def _create_private(path: Path) -> None:
    """Create the store's file readable and writable by its owner only (0600, whatever the umask)
    before SQLite opens it: its -wal and -shm files take its mode. An existing file is left as it is."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return
    os.fchmod(fd, 0o600)
    os.close(fd)


def _make_reserve(path: Path, size: int = 4 << 20) -> None:
    """Space set aside so that the store can still record jobs when the disk fills up."""
    if path.exists():
        return
    try:
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            os.posix_fallocate(f.fileno(), 0, size)
    except OSError:
        path.unlink(missing_ok=True)  # no room even for that: run without a reserve


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``: takes the write lock up front, so no upgrade deadlock."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock, ended: Callable[[], None]):
        self.db, self.lock, self.ended = db, lock, ended

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.lock.release()
            raise
        return self.db

    def __exit__(self, exc_type, *_):
        try:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.ended()
            self.lock.release()
