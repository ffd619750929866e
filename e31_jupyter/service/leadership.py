"""One scheduler per data directory: the server that holds an OS file lock on it.

Any number of Jupyter servers may share a data directory; all of them submit, cancel and read
through the store, and the holder of the lock also schedules. When it dies the lock goes with it,
and another server (or the same one restarted) takes over and adopts the running jobs.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

log = logging.getLogger("e31")

TICK_S = 0.2  # how often the scheduler looks for other servers' writes and time limits
LOCK_RETRY_S = 1.0  # how often a server that is not the scheduler tries to become it


class Leadership:
    """Holds the lock when it can, and calls ``elected`` once it does, then ``tick`` every TICK_S."""

    def __init__(self, data_dir: Path, elected: Callable[[], None], tick: Callable[[], None]):
        self.data_dir = data_dir
        self.elected = elected
        self.tick = tick
        self.holds = False
        self._lock_file: IO[str] | None = None
        self._ticker: asyncio.Task | None = None

    async def start(self) -> None:
        self.try_to_lead()
        self._ticker = asyncio.create_task(self._tick_forever())

    async def stop(self) -> None:
        """Stop scheduling. Running jobs go on; the next scheduler adopts them."""
        if self._ticker:
            self._ticker.cancel()
        if self._lock_file:
            self._lock_file.close()
            self._lock_file = None
        self.holds = False

    def try_to_lead(self) -> None:
        lock_file = open(self.data_dir / "scheduler.lock", "a+")
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock_file.close()
            return
        lock_file.seek(0)
        lock_file.truncate()
        lock_file.write(f"{os.getpid()}\n")
        lock_file.flush()
        self._lock_file = lock_file
        self.holds = True
        log.info("e31: this server schedules the queue in %s", self.data_dir)
        self.elected()

    async def _tick_forever(self) -> None:
        last_lock_try = 0.0
        while True:
            await asyncio.sleep(TICK_S)
            try:
                if self.holds:
                    self.tick()
                elif time.monotonic() - last_lock_try >= LOCK_RETRY_S:
                    last_lock_try = time.monotonic()
                    self.try_to_lead()
            except Exception:  # a bad tick must not stop the queue
                log.exception("e31: scheduler tick failed")
