"""The one REST client for the e31 API, shared by the magics, the widgets and the CLI."""

from __future__ import annotations

import json
import os
import re
import time
from contextlib import suppress
from pathlib import Path, PurePosixPath
from urllib.parse import quote, urlsplit

import requests

from e31_jupyter.core.errors import Conflict, E31Error, InvalidRequest, NotFound, ServerUnavailable
from e31_jupyter.core.job import MAX_IDS, MAX_PAGE_SIZE
from e31_jupyter.core.states import FINAL_STATES

API_PREFIX = "e31/api/"
TIMEOUT = (5, 60)  # seconds: (connect, read between bytes)
PROBE_TIMEOUT = (2, 5)
MAX_POLL_S = 1.0  # a finished job is noticed within a second; a GET costs the server little
ERRORS_BY_STATUS = {400: InvalidRequest, 404: NotFound, 409: Conflict}
JOB_ID = re.compile(r"\d{6}-[0-9a-f]{8}")  # as the queue makes them: submit date, then 8 hex digits
SHORTEST_REF = 4  # characters of an id that name a job
LAST = "last"  # names your newest job
UNIX_SCHEME = "http+unix://"
SYSTEM_SOCKET = "/run/e31/e31.sock"  # the machine's system scheduler (e31 serve --system), if any
NO_SERVER_HINT = (
    "Start one with `e31 lab` or `e31 serve`, "
    "or point to one with E31_URL and E31_TOKEN or E31_TOKEN_FILE (or --url), or to a system scheduler "
    "with E31_SOCKET."
)


class Connection:
    """The HTTP session to one e31 server: found (``url``/``token`` if given, else ``$E31_URL`` and
    its token, else ``$E31_SOCKET``, else the first running Jupyter server on this machine that
    serves the e31 API, else the system scheduler's socket), authenticated, and asked."""

    def __init__(self, url: str | None = None, token: str | None = None):
        self.session = requests.Session()
        url = url or os.environ.get("E31_URL")
        if url:
            self._use(url, token or _token_from_environment() or _token_of_running_server(url))
        elif os.environ.get("E31_SOCKET"):
            self._use(socket_url(os.environ["E31_SOCKET"]), "")
        elif not self._discover():
            raise ServerUnavailable(f"No running Jupyter server with e31 was found. {NO_SERVER_HINT}")

    def _use(self, url: str, token: str) -> None:
        if url.startswith("unix:"):
            url = socket_url(url.removeprefix("unix:").removeprefix("//"))
        if url.startswith(UNIX_SCHEME):  # the system scheduler: the kernel says who we are
            import requests_unixsocket

            self.session = requests_unixsocket.Session()
        self.url = url.rstrip("/") + "/"
        self.api = self.url + API_PREFIX
        if token:
            self.session.headers["Authorization"] = f"token {token}"
        else:
            self.session.headers.pop("Authorization", None)

    def _discover(self) -> bool:
        """The first of this user's running Jupyter servers that serves e31, else the machine's
        system scheduler."""
        candidates = [(server["url"], server.get("token", "")) for server in _running_servers()]
        if os.path.exists(SYSTEM_SOCKET):
            candidates.append((socket_url(SYSTEM_SOCKET), ""))
        for url, token in candidates:
            self._use(url, token)
            try:
                response = self.session.get(self.api + "gpus", timeout=PROBE_TIMEOUT)
            except requests.RequestException:
                continue
            if response.status_code == 200:
                return True
        return False

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        try:
            response = self.session.request(method, self.api + path, timeout=TIMEOUT, **kwargs)
        except requests.RequestException as exc:
            raise ServerUnavailable(
                f"Cannot reach the e31 server at {self.url} ({_reason(exc)}). {NO_SERVER_HINT}"
            ) from None
        if not response.ok:
            raise _error_from(response)
        return response

    def json(self, method: str, path: str, **kwargs):
        return self.request(method, path, **kwargs).json()

    def save(self, url_path: str, destination: Path, private: bool = False) -> None:
        """Stream ``url_path`` into ``destination``; a ``private`` file is this user's alone (0600)."""
        destination.parent.mkdir(parents=True, exist_ok=True)
        with self.request("GET", url_path, stream=True) as response:
            with _private_file(destination) if private else open(destination, "wb") as out:
                for chunk in response.iter_content(chunk_size=1 << 20):
                    out.write(chunk)


class E31Client:
    """Talks to an e31 server: submit jobs, follow them, collect their output.

    The server is ``url``/``token`` if given, else ``$E31_URL``/``$E31_TOKEN``, else the first
    running Jupyter server on this machine that serves the e31 API (``Connection``).
    """

    def __init__(self, url: str | None = None, token: str | None = None):
        self.connection = Connection(url, token)
        self.url, self.api = self.connection.url, self.connection.api  # the server, and its e31 API
        self.session = self.connection.session

    def _json(self, method: str, path: str, **kwargs):
        return self.connection.json(method, path, **kwargs)

    # -- the API ----------------------------------------------------------------------------

    def submit(self, **body) -> dict:
        """Submit a job (see the API's submit body); returns the job plus ``warnings``. The jobs
        of ``after`` may be named as ``resolve`` takes them."""
        return self._json("POST", "jobs", json=_handed_over(self, _after_resolved(self, body)))

    def resubmit(self, job_id: str, **changes) -> dict:
        """Run an earlier job's notebook again as a new job, its request changed by ``changes``
        (parameters merged); returns the new job plus ``warnings``."""
        return self._json("POST", f"jobs/{quote(job_id)}/resubmit", json=_after_resolved(self, changes))

    def check_resubmit(self, job_id: str, **changes) -> dict:
        """What ``resubmit`` would give, with nothing submitted."""
        return self._json("POST", f"jobs/{quote(job_id)}/resubmit/check", json=_after_resolved(self, changes))

    def check(self, **body) -> dict:
        """What submitting ``body`` would give (place in line, expected start, ``warnings``),
        with nothing submitted; raises what a submit would refuse."""
        return self._json("POST", "check", json=_handed_over(self, _after_resolved(self, body)))

    def jobs(
        self,
        state: str | None = None,
        fingerprint: str | None = None,
        limit: int | None = None,
        ids: list[str] | None = None,
    ) -> list[dict]:
        """Your jobs (everyone's for an admin), newest first: all of them, or the newest ``limit``,
        or those of ``ids`` that you may see; the server sends them a page at a time."""
        params = {k: v for k, v in (("state", state), ("fingerprint", fingerprint)) if v}
        if not ids:
            return self._pages(params, limit)
        chunks = (ids[i : i + MAX_IDS] for i in range(0, len(ids), MAX_IDS))
        return [job for chunk in chunks for job in self._pages({**params, "id": chunk}, limit)]

    def _pages(self, params: dict, limit: int | None) -> list[dict]:
        found: list[dict] = []
        while limit is None or len(found) < limit:
            if limit is not None:
                params["limit"] = min(limit - len(found), MAX_PAGE_SIZE)
            page = self._json("GET", "jobs", params=params)
            found.extend(page["jobs"])
            if not page.get("next"):
                break
            params["before"] = page["next"]
        return found

    def resolve(self, ref: str) -> str:
        """The id of the job ``ref`` names: a whole id; ``last``, your newest job; or the start of
        an id, or of its part after the dash, that one job alone has (``b90c`` for
        ``261201-b90c4400``)."""
        ref = ref.strip().lower()
        if JOB_ID.fullmatch(ref):
            return ref
        if ref == LAST:
            newest = self.jobs(limit=1)
            if not newest:
                raise NotFound("There are no jobs yet, so `last` names none. Submit one first.")
            return newest[0]["id"]
        if len(ref) < SHORTEST_REF:
            raise InvalidRequest(
                f"'{ref}' is too short to name a job: give at least {SHORTEST_REF} characters of its "
                f"id, or `{LAST}` for your newest job."
            )
        return _only_match(ref, [job for job in self.jobs() if _id_starts_with(job["id"], ref)])

    def resolve_all(self, refs: list[str]) -> list[str]:
        """The ids of the jobs ``refs`` name, each once: all of them, before anything is done
        to one (a name that fits no job raises here)."""
        return list(dict.fromkeys(self.resolve(ref) for ref in refs))

    def job(self, job_id: str) -> dict:
        return self._json("GET", f"jobs/{quote(job_id)}")

    def update(self, job_id: str, **changes) -> dict:
        """Change a queued job's request (gpus, max_runtime, expected_runtime, deadline; None
        clears a run time or the deadline), name, team or ``after`` (the jobs it runs after; []
        for none); returns the job, with ``changed`` (what did, as people read it) and
        ``warnings``."""
        return self._json("PATCH", f"jobs/{quote(job_id)}", json=_after_resolved(self, changes))

    def suspend(self, job_id: str) -> dict:
        """Stop a running job at its cell's end, with a checkpoint; it waits until resumed."""
        return self._json("POST", f"jobs/{quote(job_id)}/suspend")

    def resume(self, job_id: str, **changes) -> dict:
        """Put a failed job back in line from its last checkpoint (``changes``: gpus,
        max_runtime, expected_runtime, deadline)."""
        return self._json("POST", f"jobs/{quote(job_id)}/resume", json=changes)

    def cancel(self, job_id: str) -> dict:
        return self._json("POST", f"jobs/{quote(job_id)}/cancel")

    def delete_files(self, job_id: str) -> dict:
        return self._json("DELETE", f"jobs/{quote(job_id)}/files")

    def notebook(self, job_id: str) -> dict:
        """The executed notebook (nbformat JSON); Conflict until it exists."""
        return self._json("GET", f"jobs/{quote(job_id)}/notebook")

    def report(self, job_id: str) -> str:
        """The HTML report of the executed notebook."""
        return self.connection.request("GET", f"jobs/{quote(job_id)}/report").text

    def files(self, job_id: str) -> list[dict]:
        """The collected files: ``[{"path": ..., "size": ...}]``."""
        return self._json("GET", f"jobs/{quote(job_id)}/files")["files"]

    def download(self, job_id: str, path: str) -> bytes:
        return self.connection.request("GET", _file_url(job_id, path)).content

    def save_file(self, job_id: str, path: str, destination: Path) -> None:
        """Stream one collected file to ``destination`` (large files never sit in memory)."""
        self.connection.save(_file_url(job_id, path), destination)

    def values(self, job_id: str) -> dict:
        """The values a job returned: ``{"values": [{name, type, size, skipped, module}], "files": [...]}``."""
        return self._json("GET", f"jobs/{quote(job_id)}/values")

    def save_values(self, job_id: str, folder: Path, listing: dict | None = None) -> dict:
        """Download the returned values' files into ``folder``; returns the listing (``listing``:
        one already fetched). The folder (0700) and its files (0600) are this user's alone,
        whatever the umask: what ``values.load`` accepts."""
        listing = listing or self.values(job_id)
        if listing["files"]:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            folder.chmod(0o700)
        for name in listing["files"]:
            self.connection.save(f"jobs/{quote(job_id)}/values/{quote(name)}", folder / name, private=True)
        return listing

    def info(self) -> dict:
        return self._json("GET", "info")

    def log(self, job_id: str, offset: int = 0) -> dict:
        """Log text from byte ``offset``: ``{"text", "offset" (the next one), "final"}``."""
        return self._json("GET", f"jobs/{quote(job_id)}/log", params={"offset": offset})

    def log_tail(self, job_id: str, lines: int = 50) -> str:
        return self._json("GET", f"jobs/{quote(job_id)}/log", params={"tail": lines})["text"]

    def meter(self, since: str | None = None, until: str | None = None) -> dict:
        """GPU-hours and cost in a window (default: the last 7 days), by user and by team."""
        params = {key: value for key, value in (("since", since), ("until", until)) if value}
        return self._json("GET", "meter", params=params)

    def gpus(self) -> dict:
        return self._json("GET", "gpus")

    # -- built on the API -------------------------------------------------------------------

    def wait(self, job_id: str, poll: float = 0.1, timeout: float | None = None, on_update=None) -> dict:
        """Poll until the job reaches a final state and return it.

        The interval grows from ``poll`` to one second. ``on_update(job)`` is called after
        every poll. Raises E31Error (status 408) if ``timeout`` seconds pass first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if on_update:
                on_update(job)
            if job["state"] in FINAL_STATES:
                return job
            if deadline is not None and time.monotonic() + poll > deadline:
                raise E31Error(f"Job {job_id} is still {job['state']} after {timeout:g}s.", 408)
            time.sleep(poll)
            poll = min(poll * 1.5, MAX_POLL_S)

    def collect(self, job_id: str, to_dir: str | os.PathLike) -> Path:
        """Write a finished job's output into ``to_dir`` (``to_dir-JOB`` when it holds another
        job's) and return where.

        Layout: ``job.json`` (the job with its transitions), ``<notebook>.executed.ipynb`` and
        ``<notebook>.executed.html`` when the server has them, the collected files under
        ``files/`` at their relative paths, and the values a ``%%e31`` cell returned under
        ``values/`` (``e31_jupyter.values.load`` reads them).
        """
        job = self.job(job_id)
        if job["state"] not in FINAL_STATES:
            raise Conflict(f"Job {job_id} is still {job['state']}; collect it once it has finished.")
        root = _collect_folder(Path(to_dir), job_id)
        files = self.files(job_id)
        targets = [(entry["path"], safe_destination(root / "files", entry["path"])) for entry in files]
        root.mkdir(parents=True, exist_ok=True)
        (root / "job.json").write_text(json.dumps(job, indent=2) + "\n", encoding="utf-8")
        stem = PurePosixPath((job.get("work") or {}).get("notebook") or "notebook").stem
        # A job cancelled or expired while queued has neither notebook nor report.
        with suppress(Conflict, NotFound):
            notebook = json.dumps(self.notebook(job_id), indent=1)
            (root / f"{stem}.executed.ipynb").write_text(notebook, encoding="utf-8")
        with suppress(Conflict, NotFound):
            (root / f"{stem}.executed.html").write_text(self.report(job_id), encoding="utf-8")
        for path, destination in targets:
            self.save_file(job_id, path, destination)
        self.save_values(job_id, root / "values")  # a %%e31 cell's; nothing (no folder) for a notebook's
        return root


def _private_file(path: Path):
    """``path`` emptied and opened for writing, readable and writable by this user only (whatever
    the umask, whatever it was), never through a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")


def _collect_folder(folder: Path, job_id: str) -> Path:
    """``folder``, unless it holds another job's collected output (its job.json): then
    ``folder-JOB``, so that one job's output never overwrites or mixes with another's."""
    try:
        other = json.loads((folder / "job.json").read_text()).get("id")
    except (OSError, ValueError, AttributeError):
        return folder
    return folder if other == job_id else folder.with_name(f"{folder.name}-{job_id}")


def socket_url(socket_path: str) -> str:
    """The base URL of a server on a Unix socket, as requests-unixsocket reads it."""
    return UNIX_SCHEME + quote(socket_path, safe="")


def _token_from_environment() -> str:
    """``$E31_TOKEN``, else the first line of the file ``$E31_TOKEN_FILE`` names."""
    if os.environ.get("E31_TOKEN"):
        return os.environ["E31_TOKEN"]
    path = os.environ.get("E31_TOKEN_FILE")
    return read_token_file(path) if path else ""


def read_token_file(path: str) -> str:
    """The token in the file ``path`` (its first line)."""
    try:
        return Path(path).read_text().strip()
    except OSError as error:
        raise ServerUnavailable(f"Cannot read the token file {path} ({error.strerror}).") from None


def _token_of_running_server(url: str) -> str:
    """The token of this user's running Jupyter server at ``url``, from its runtime file (which
    only this user can read): kernels are given the address, never the token."""
    wanted = _same_server_key(url)
    for server in _running_servers():
        if _same_server_key(server.get("url", "")) == wanted:
            return server.get("token", "")
    return ""


def _same_server_key(url: str) -> tuple:
    """What tells servers apart in a URL: ``http://localhost:8888/`` and ``http://127.0.0.1:8888``
    are one server."""
    parts = urlsplit(url)
    host = "local" if parts.hostname in (None, "localhost", "127.0.0.1", "::1", "0.0.0.0") else parts.hostname
    return parts.scheme, host, parts.port, parts.path.rstrip("/")


def _running_servers() -> list[dict]:
    """This user's running Jupyter servers, from their runtime files (without importing
    jupyter_server, which takes seconds)."""
    from jupyter_core.paths import jupyter_runtime_dir

    servers = []
    files = sorted(Path(jupyter_runtime_dir()).glob("jpserver-*.json"), key=_modified, reverse=True)
    for file in files:  # the newest first: a dead server's file may name the same address
        try:
            servers.append(json.loads(file.read_text()))
        except (OSError, ValueError):
            continue
    return servers


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _id_starts_with(job_id: str, ref: str) -> bool:
    return job_id.startswith(ref) or job_id.partition("-")[2].startswith(ref)


def _only_match(ref: str, jobs: list[dict]) -> str:
    if len(jobs) == 1:
        return jobs[0]["id"]
    if not jobs:
        raise NotFound(f"No job's id starts with '{ref}'. List your jobs with `e31 jobs`.")
    named = ", ".join(f"{job['id']} ({job['name']})" for job in jobs[:5])
    more = f" and {len(jobs) - 5} more" if len(jobs) > 5 else ""
    raise InvalidRequest(f"'{ref}' could be any of {len(jobs)} jobs: {named}{more}. Give more of the id.")


def safe_destination(root: Path, relative: str) -> Path:
    """``root / relative``, refusing paths that are empty, absolute or climb out of ``root``."""
    parts = PurePosixPath(relative.replace("\\", "/")).parts
    if not parts or parts[0] == "/" or ".." in parts or re.match(r"^[A-Za-z]:", relative):
        raise InvalidRequest(f"Refusing to write the unsafe file path {relative!r}.")
    destination = root.joinpath(*parts)
    if not destination.resolve().is_relative_to(root.resolve()):
        raise InvalidRequest(f"Refusing to write {relative!r} outside {root}.")
    return destination


def _file_url(job_id: str, path: str) -> str:
    return f"jobs/{quote(job_id)}/files/{quote(path)}"


def _error_from(response: requests.Response) -> E31Error:
    """The errors.py exception for a non-2xx response, carrying the server's message."""
    try:
        message = response.json()["message"]
    except (ValueError, KeyError, TypeError):
        message = None
    if not message:
        message = f"{response.status_code} {response.reason} for {response.request.method} {response.url}"
    if response.status_code in (401, 403):
        message += " (check the token: --token or E31_TOKEN)"
    cls = ERRORS_BY_STATUS.get(response.status_code)
    return cls(message) if cls else E31Error(message, response.status_code)


def _reason(exc: requests.RequestException) -> str:
    """A short reason for a connection failure, e.g. 'Connection refused'."""
    if isinstance(exc, requests.Timeout):
        return "timed out"
    match = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(exc))
    return match.group(1).strip() if match else type(exc).__name__


def _after_resolved(client: E31Client, body: dict) -> dict:
    """``body`` with the jobs its ``after`` names (a name, ``last``, part of an id) as their ids."""
    after = body.get("after")
    if not after:
        return body
    refs = [after] if isinstance(after, str) else after
    return {**body, "after": [client.resolve(ref) if isinstance(ref, str) else ref for ref in refs]}


def _handed_over(client: E31Client, body: dict) -> dict:
    """The body as this user hands it to a system scheduler, which reads no file for anyone
    (handover.py); as it is for a Jupyter server, which reads them itself."""
    if not client.url.startswith(UNIX_SCHEME):
        return body
    from e31_jupyter.service.handover import hand_over

    return hand_over(body, Path.cwd(), Path(client.info()["inbox"]))
