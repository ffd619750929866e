"""Job changes announced on jupyter_server's event bus (``/api/events/subscribe``).

JupyterLab polls the queue only while a view of it is on screen or one of the user's jobs is
active. A job submitted from a terminal, a console or another server sharing the data directory
would go unseen until then; an event for each state change (submitted, started, changed,
ended) tells the browser to look again, so the status bar and notifications follow every job
without polling while nothing runs.

Every client of a server hears every event, and a queue may be shared by many users' servers:
an event names its job's owner only by a key (an HMAC with this server's secret), which
``/e31/api/info`` gives each caller for their own name. Nor does it name the job.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets

log = logging.getLogger(__name__)

SCHEMA_ID = "https://e31-jupyter.org/events/job/v1"
SCHEMA = {
    "$id": SCHEMA_ID,
    "version": "1",
    "title": "e31 job state changes",
    "description": "A job of the e31 queue changed state (or, queued, its request changed).",
    "type": "object",
    "required": ["owner_key", "state"],
    "properties": {
        "owner_key": {"type": "string", "title": "the owner's key (events_key of /e31/api/info)"},
        "state": {"type": "string", "title": "the state the job moved to"},
    },
}
WATCH_S = 1.0  # how often the store is read for new changes (one indexed query)


class JobEvents:
    """Reads the queue's state changes, by any server, and emits one event for each."""

    def __init__(self, queue, event_logger) -> None:
        self.queue = queue
        self.event_logger = event_logger
        # Before the server takes connections: a subscriber hears only the schemas known when it came.
        event_logger.register_event_schema(SCHEMA)
        self._secret = secrets.token_bytes(16)
        self._seen = 0
        self._task: asyncio.Task | None = None

    def owner_key(self, owner: str) -> str:
        """What this server's events say for ``owner``: the same for all their jobs, and not
        their name to whoever lacks the secret."""
        return hmac.new(self._secret, owner.encode(), hashlib.sha256).hexdigest()[:16]

    def start(self) -> None:
        self._seen = self.queue.views.last_change()  # changes before this server started are history
        self._task = asyncio.create_task(self._forward_forever())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _forward_forever(self) -> None:
        while True:
            await asyncio.sleep(WATCH_S)
            try:
                self.forward()
            except Exception:  # a bad read must not end the announcements
                log.exception("e31: announcing job changes failed")

    def forward(self) -> None:
        for change in self.queue.views.changes_after(self._seen):
            self.event_logger.emit(
                schema_id=SCHEMA_ID,
                data={"owner_key": self.owner_key(change["owner"]), "state": change["to"]},
            )
            self._seen = change["seq"]
