"""The one exception family: a message a person can act on, and the HTTP status it maps to."""


class E31Error(Exception):
    """An error the user can fix. ``str(error)`` is the message shown to them."""

    status = 400

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class InvalidRequest(E31Error):
    """The request is malformed or asks for something not allowed (HTTP 400)."""

    status = 400


class NotFound(E31Error):
    """No such job or file, or not one the caller may see (HTTP 404)."""

    status = 404


class Conflict(E31Error):
    """The job is not in a state that allows this (HTTP 409)."""

    status = 409


class Gone(E31Error):
    """What was asked for existed but was deleted (HTTP 410): a job's files."""

    status = 410


class ServerUnavailable(E31Error):
    """The client found no e31 server to talk to."""

    status = 503
