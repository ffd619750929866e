"""A user's Jupyter server in front of the machine's system scheduler (``c.E31.scheduler_socket``).

It keeps no queue of its own: every ``/e31/api/`` request is forwarded over the scheduler's Unix
socket, where the kernel names the caller as this server's Unix user, so the panel, the magics
and the ``e31`` command of this user work as they do with a queue of their own. A submit's
notebook and data are read here, as this user, and handed over (``handover.py``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from e31_jupyter.client import socket_url
from e31_jupyter.core.errors import E31Error
from e31_jupyter.service.handover import SUBMITS, hand_over

AUTH_RESOURCE = "e31"
CHUNK = 1 << 20
PASSED_HEADERS = ("Content-Type", "Content-Disposition", "Content-Security-Policy", "Content-Length")


class ForwardHandler(APIHandler):
    """Any e31 API call, answered by the system scheduler."""

    auth_resource = AUTH_RESOURCE

    @property
    def scheduler(self):
        return self.settings["e31_scheduler"]

    async def _forward(self, path: str) -> None:
        try:
            body = await asyncio.to_thread(self._body, path)
            response = await asyncio.to_thread(
                self.scheduler.request, self.request.method, path, self.request.query, body
            )
        except E31Error as error:
            self.set_status(error.status)
            self.finish({"message": error.message})
            return
        self.set_status(response.status_code)
        for name in PASSED_HEADERS:
            if name in response.headers:
                self.set_header(name, response.headers[name])
        chunks = response.iter_content(CHUNK)
        while chunk := await asyncio.to_thread(next, chunks, b""):
            self.write(chunk)
            await self.flush()
        self.finish()

    def _body(self, path: str) -> bytes | None:
        if self.request.method != "POST" or not (path in SUBMITS or path.endswith(("/resubmit", "/resubmit/check"))):
            return self.request.body or None
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            return self.request.body  # the scheduler says what is wrong with it
        if not isinstance(body, dict):
            return self.request.body
        root_dir = Path(self.settings.get("server_root_dir", ".")).expanduser()
        handed = hand_over(body, root_dir, self.scheduler.inbox())
        return json.dumps(handed).encode()

    @web.authenticated
    @authorized
    async def _any_method(self, path):
        await self._forward(path)

    get = post = patch = delete = _any_method


class SystemScheduler:
    """The system scheduler's API over its Unix socket, as this server's user."""

    def __init__(self, socket_path: str):
        import requests_unixsocket

        self.socket_path = socket_path
        self.base = socket_url(socket_path) + "/e31/api/"
        self.session = requests_unixsocket.Session()

    def request(self, method: str, path: str, query: str, body: bytes | None):
        import requests

        url = self.base + path + (f"?{query}" if query else "")
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            return self.session.request(method, url, data=body, headers=headers, stream=True, timeout=(5, 300))
        except requests.RequestException as error:
            raise E31Error(
                f"The machine's e31 scheduler does not answer at {self.socket_path} ({error.__class__.__name__}). "
                "Ask its admin to start it (`e31 serve --system`, or its systemd unit), or unset "
                "c.E31.scheduler_socket to run a queue of your own.",
                status=503,
            ) from None

    def inbox(self) -> Path:
        """This user's inbox folder on the scheduler, where handed-over data goes."""
        response = self.request("GET", "info", "", None)
        if not response.ok:
            raise E31Error(f"The e31 scheduler refused to say where to hand data over: {response.text}", 503)
        return Path(response.json()["inbox"])


def routes() -> list[tuple[str, type]]:
    return [(r"/e31/api/(?P<path>.*)", ForwardHandler)]
