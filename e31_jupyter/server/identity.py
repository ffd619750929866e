"""Who is calling the system scheduler: the Unix user at the other end of its socket.

``e31 serve --system`` listens on a Unix socket only. The kernel tells it the uid of the
process that connected (``SO_PEERCRED``), so a caller is who they are, never who a header, a
token or ``$LOGNAME`` says. A browser cannot reach a Unix socket, so there is no cross-site
request to guard against and no token to steal.
"""

from __future__ import annotations

import socket
import struct

from jupyter_server.auth.identity import IdentityProvider, User

from e31_jupyter.execution import accounts

_UCRED = struct.Struct("3i")  # pid, uid, gid


def peer_uid(sock: socket.socket | None) -> int | None:
    """The uid of the process at the other end of a Unix socket; None for any other socket."""
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    _, uid, _ = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return uid


class PeerCredIdentityProvider(IdentityProvider):
    """Names each caller after the Unix account of the process that connected to the socket."""

    def get_user(self, handler) -> User | None:
        stream = getattr(handler.request.connection, "stream", None)
        uid = peer_uid(getattr(stream, "socket", None))
        if uid is None:
            return None  # not over the Unix socket: nobody
        handler._token_authenticated = True  # the kernel vouched for the caller: no XSRF form token
        return User(username=accounts.by_uid(uid).name)

    @property
    def auth_enabled(self) -> bool:
        return True
