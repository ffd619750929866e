"""Where a job runs. Each backend has one small interface:

``start(job_id, jobdir, devices) -> handle`` launches the worker and returns a JSON-able handle
that the store keeps, so a restarted server can ``adopt(job_id, handle)`` it; ``wait(handle)``
blocks until the job's process has ended and returns its exit code (None when unknown);
``stop(job_id, handle, grace)`` ends it (politely first); ``sweep(job_id)`` ends anything the job
left behind.
"""

from __future__ import annotations


def create(name: str, **settings):
    if name == "local":
        from .local import LocalBackend

        return LocalBackend(**settings)
    raise ValueError(f"unknown backend {name!r}; available: local")
