"""Job changes on jupyter_server's event bus, heard as a browser hears them: the real
``/api/events/subscribe`` websocket of a real e31 server."""

from __future__ import annotations

import asyncio
import json
import threading
import time

from conftest import wait_for, wait_state
from tornado.websocket import websocket_connect

from e31_jupyter.client import E31Client
from e31_jupyter.server.events import SCHEMA_ID


class EventStream:
    """The server's event websocket, read in a thread of its own."""

    def __init__(self, server):
        self.url = f"ws://127.0.0.1:{server.port}/api/events/subscribe?token={server.token}"
        self.events: list[dict] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> EventStream:
        self._thread.start()
        self._socket = self._call(self._connect()).result(timeout=30)
        self._call(self._read())
        return self

    def __exit__(self, *_) -> None:
        self._loop.call_soon_threadsafe(self._socket.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    async def _connect(self):
        return await websocket_connect(self.url)

    async def _read(self) -> None:
        while (message := await self._socket.read_message()) is not None:
            self.events.append(json.loads(message))

    def jobs(self) -> list[dict]:
        """The e31 events heard so far, oldest first."""
        return [e for e in self.events if e["schema_id"] == SCHEMA_ID]

    def states(self) -> list[str]:
        return [e["state"] for e in self.jobs()]


def test_each_change_of_a_job_is_announced_once_in_order_under_a_key_for_its_owner(server, client, gated):
    with EventStream(server) as stream:
        time.sleep(2.5)  # an idle queue announces nothing
        assert stream.jobs() == []

        job = gated.submit(client, "a", gpus=1)
        wait_for(lambda: stream.states() == ["queued", "running"], timeout=30, what="queued, running")
        waiting = gated.submit(client, "b", gpus=2)  # one GPU is free: it waits
        client.update(waiting["id"], name="renamed")
        client.cancel(waiting["id"])
        gated.open("a")
        wait_state(client, job["id"], "succeeded")
        wait_for(lambda: len(stream.states()) == 6, timeout=30, what="the ending")

        # a: submitted, started; b: submitted, changed, cancelled; a: ended
        assert stream.states() == ["queued", "running", "queued", "queued", "cancelled", "succeeded"]
        info = client.info()
        assert {e["owner_key"] for e in stream.jobs()} == {info["events_key"]}
        assert info["user"] not in json.dumps(stream.jobs())  # others on the bus do not learn the name


def test_a_server_announces_what_another_server_on_the_same_queue_did_but_not_the_past(start_server, gated, tmp_path):
    scheduler = start_server()
    to_scheduler = E31Client(scheduler.url, scheduler.token)
    earlier = gated.submit(to_scheduler, "earlier", gpus=1)
    gated.open("earlier")
    wait_state(to_scheduler, earlier["id"], "succeeded")

    other = start_server(data_dir=tmp_path / "data")  # the same queue, seen from a second server
    with EventStream(other) as stream:
        later = gated.submit(to_scheduler, "later", gpus=1)
        wait_for(lambda: stream.states()[:2] == ["queued", "running"], timeout=30, what="the later job")
        gated.open("later")
        wait_state(to_scheduler, later["id"], "succeeded")
        wait_for(lambda: len(stream.states()) >= 3, timeout=30, what="its end")
        time.sleep(1.5)
        # Only the later job; the earlier one ended before the second server started.
        assert stream.states() == ["queued", "running", "succeeded"]
        # Each server keys owners with its own secret: the key is the one the second server gives.
        assert {e["owner_key"] for e in stream.jobs()} == {E31Client(other.url, other.token).info()["events_key"]}
        assert to_scheduler.info()["events_key"] != E31Client(other.url, other.token).info()["events_key"]
