"""The whole REST API fuzzed from ``openapi.yaml`` (schemathesis) against a real server.

One server (``ServerProcess``, two configured GPUs) holds real jobs before the fuzz starts:

- ``done``: succeeded, with an executed notebook, an HTML report, a log, collected files
  (one in a sub-folder, one with a space in its name, one empty) and returned values (as a
  ``%%e31`` cell's job hands them back: a small one, a numpy array with a buffer file of its
  own, and a module, by name), so ``{id}``, ``{path}`` and ``{name}`` reach real objects;
- ``blocker``: running, holding both GPUs until the test opens its gate, so that every job the
  fuzz manages to submit stays queued: nothing the fuzz sends ever runs;
- ``waiting``: queued behind it (the one live job the fuzz may cancel and resubmit);
- ``spare``: succeeded, the one ended job whose files the fuzz may delete (every other
  operation reads ``done``'s).

First every operation is called once, unfuzzed, on every real object it may touch (every
collected file for downloadFile, every value file for downloadValueFile). Then every operation
is fuzzed with data that fits the spec (positive) and data that does not (negative), with
generated ``{id}``, ``{path}`` and ``{name}`` values (unknown objects) and with the real ones. Every request carries the token. Checks: no 5xx, and
every answer's status code, content type and body are ones the spec declares; the server logs no
traceback. Last, each operation without the token, and with a wrong one: refused (403). The
number of examples per operation, mode and kind of id is ``E31_FUZZ_EXAMPLES`` (default 16:
about 480 requests, about a minute on 2 cores).

What the fuzz may submit is kept small: ``data`` entries that name anything that exists become
one small file (a fuzzed ``"/"`` or ``"."`` would copy the file system, or the data directory
into itself, into a job); half of the positive submits name a real one-cell notebook with a sane
request (so that some are accepted and their 201 answers are checked too), and those, like every
resubmit, ask for at least one GPU, so they queue behind the blocker. Every job the fuzz created
is cancelled at the end, and the test checks that none of them ever started.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import nbformat
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from nbformat.v4 import new_code_cell, new_notebook
from schemathesis import GenerationMode, checks
from schemathesis.errors import FailureGroup
from server_process import ServerProcess

import e31_jupyter
from e31_jupyter.client import E31Client

SPEC = Path(e31_jupyter.__file__).parent / "server" / "openapi.yaml"
EXAMPLES = int(os.environ.get("E31_FUZZ_EXAMPLES", "16"))
FINAL = {"succeeded", "failed", "cancelled", "expired"}
CHECKS = [
    checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
    checks.response_schema_conformance,
]  # fmt: skip
# Ids the fuzz should try besides its own; "." and ".." are left out: the HTTP client folds them
# away before the server sees them.
UNKNOWN_IDS = ["000000-00000000", "260101-deadbeef", "a" * 300, "-", "_.x", "x y", "é", "%41"]
ODD_PATHS = ["../spec.json", "../../e31.sqlite", "out", "out/", "missing.txt", "/etc/passwd", "out/../top level.txt"]
ODD_NAMES = ["..", "../spec.json", "answer", "answer.pkl.", "values.json/", "missing.pkl", "%2e%2e"]
# The blocker is never cancelled (queued fuzz jobs would start) nor resubmitted (a copy would
# wait for its gate).
WRITES = {"cancelJob", "resubmitJob"}
DELETES = {"deleteFiles"}  # on "spare": the others read "done"'s files
SUBMITS = {"submitJob", "resubmitJob", "checkSubmit", "checkResubmit"}
RESUBMITS = {"resubmitJob", "checkResubmit"}
# A request the server accepts, for the positive submits that name a real notebook: each field
# given or left out.
SANE = st.fixed_dictionaries(
    {},
    optional={
        "deadline": st.sampled_from(["+6h", "08:00", "2099-01-01T00:00:00Z"]),
        "max_runtime": st.sampled_from(["90m", 3600, "1d", "1h30m"]),
        "expected_runtime": st.sampled_from(["30m", 60]),
        "reports": st.sampled_from([[], ["html"]]),
        "outputs": st.sampled_from([[], ["*.csv", "out/**"]]),
        "parameters": st.sampled_from([{}, {"epochs": 3, "lr": 0.1, "tag": "x"}]),
    },
)
TORNADO_MAX_QUERY_FIELDS = 1000
TORNADO_MAX_HEADER_BYTES = 65536
FREE_FORM = ("deadline", "max_runtime", "expected_runtime", "reports", "outputs", "parameters")
CONTAINER_ONLY = ("image", "memory", "cpus")

DONE_CODE = """
import pathlib
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out/result.txt").write_text("42\\n")
pathlib.Path("top level.txt").write_text("spaces in the name\\n")
pathlib.Path("empty.txt").write_text("")
print("done", open("input.csv").read())

import numpy
from e31_jupyter.values import save_outputs
answer, table = 42, numpy.arange(1000.0)
save_outputs(globals(), ["answer", "table", "numpy"])
"""
BLOCKER_CODE = """
import os, time
started = time.time()
while not os.path.exists(gate) and time.time() - started < 900:
    time.sleep(0.1)
"""


def write_notebook(path: Path, source: str, parameters: str | None = None) -> Path:
    nb = new_notebook()
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if parameters is not None:
        nb.cells.append(new_code_cell(parameters, metadata={"tags": ["parameters"]}))
    nb.cells.append(new_code_cell(source))
    nbformat.write(nb, path)
    return path


def wait_state(client: E31Client, job_id: str, states: set[str], timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.job(job_id)
        if job["state"] in states:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not reach {states} within {timeout}s: {client.job(job_id)}")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    (root / "input.csv").write_text("a,b\n1,2\n")
    write_notebook(root / "done.ipynb", DONE_CODE)
    write_notebook(root / "blocker.ipynb", BLOCKER_CODE, parameters="gate = ''")
    write_notebook(root / "noop.ipynb", "pass")
    gate = root / "gate"
    server = ServerProcess(root / "data", gpus=["0", "1"], root_dir=root, log_path=root / "server.log")
    server.start()
    client = E31Client(server.url, server.token)
    try:
        done = client.submit(path="done.ipynb", data=["input.csv"], gpus=1, name="done")["id"]
        done_job = wait_state(client, done, FINAL)
        assert done_job["state"] == "succeeded", server.log_text()[-3000:]
        spare = client.submit(path="noop.ipynb", gpus=1, name="spare")["id"]
        assert wait_state(client, spare, FINAL)["state"] == "succeeded", server.log_text()[-3000:]
        blocker = client.submit(path="blocker.ipynb", gpus=2, parameters={"gate": str(gate)}, name="blocker")
        wait_state(client, blocker["id"], {"running"})
        waiting = client.submit(path="noop.ipynb", gpus=1, name="waiting")["id"]
        files = [f["path"] for f in client.files(done)]
        assert {"out/result.txt", "top level.txt", "empty.txt"} <= set(files), files
        value_files = client.values(done)["files"]
        assert {"values.json", "answer.pkl", "table.pkl", "table.0.buf"} <= set(value_files), value_files
        yield {
            "server": server, "client": client, "root": root, "gate": gate, "done": done,
            "blocker": blocker["id"], "waiting": waiting, "spare": spare, "files": files, "value_files": value_files,
        }  # fmt: skip
    finally:
        gate.touch()
        server.stop()


# Its own time limit: ~2 minutes alone, it ran past the suite's 300 s while 4 workers shared 2 cores.
@pytest.mark.timeout(900)
def test_fuzz_the_whole_api(live):
    server, root, client = live["server"], live["root"], live["client"]
    auth = {"Authorization": f"token {server.token}"}
    schema = schemathesis.openapi.from_path(str(SPEC))
    schema.config.update(base_url=f"{server.url}/e31/api")
    operations = [op.ok() for op in schema.get_all_operations()]
    assert len(operations) >= 13 and all(op.definition.raw.get("operationId") for op in operations)
    session = requests.Session()
    examples = Counter()  # per operation
    statuses: Counter = Counter()  # (operation, status)
    failures: Counter = Counter()  # (operation, what failed, status)
    first: dict[tuple, str] = {}  # the first request and answer of each failure
    server_errors: list[str] = []
    nothing_to_negate: set[str] = set()
    before = {j["id"] for j in client.jobs()}

    def fail(key: tuple, request: str, answer: str) -> None:
        failures[key] += 1
        first.setdefault(key, f"{request}\n    -> {answer}")

    def run_case(op_id: str, case) -> None:
        examples[op_id] += 1
        body = "" if _unset(case.body) else f" body={case.body!r:.300}"
        try:
            response = case.call(session=session, headers=auth, timeout=60)
        except requests.RequestException as error:
            server_errors.append(op_id)
            fail((op_id, f"no answer: {type(error).__name__}", None), f"{case.method} {case.formatted_path}{body}", "-")
            return
        assert response.request.headers.get("Authorization") == auth["Authorization"]
        statuses[(op_id, response.status_code)] += 1
        if response.status_code >= 500:
            server_errors.append(op_id)
        try:
            case.validate_response(response, checks=CHECKS, headers=auth)
        except FailureGroup as group:
            what = "; ".join(sorted({f"{f.title}: {f.message}".replace("\n", " ")[:160] for f in group.exceptions}))
            fail(
                (op_id, what, response.status_code), f"{case.method} {response.request.url}{body}",
                f"{response.status_code} {response.headers.get('content-type')} {response.text[:200]!r}",
            )  # fmt: skip

    # First, every operation once on every real object it may touch (every real file for
    # downloadFile), and one accepted submit: these answers are checked on every run.
    for op in operations:
        op_id = op.definition.raw["operationId"]
        targets = [None]
        if "{id}" in op.path:
            targets = [{"id": job_id} for job_id in _real_ids(live, op_id)]
            if "{path}" in op.path:
                targets = [{"id": live["done"], "path": path} for path in live["files"]]
            if "{name}" in op.path:
                targets = [{"id": live["done"], "name": name} for name in live["value_files"]]
        for fixed in targets:
            run_case(op_id, _plain_case(op, op_id, fixed))

    def fuzzer(op_id: str, strategy):
        @settings(
            max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip
        @given(drawn=strategy)
        def fuzz(drawn):
            case, sane, gpus = drawn
            # Negative data may leave the token out; requests without it are tested below.
            assume(not schema.is_security_param_negated(case))
            # Tornado's HTTP layer refuses a query of more fields (an empty 400) and a request
            # line past its header limit (it hangs up), before any handler: the spec cannot
            # shape those answers.
            assume(_query_fields(case) <= TORNADO_MAX_QUERY_FIELDS)
            assume(len(_url(case)) <= TORNADO_MAX_HEADER_BYTES // 2)
            if op_id in SUBMITS:
                case.body = _harmless(case.body, root, sane, gpus, resubmit=op_id in RESUBMITS)
            run_case(op_id, case)

        return fuzz

    for op in operations:
        op_id = op.definition.raw["operationId"]
        id_kinds = [None]
        if "{id}" in op.path:
            id_kinds.append(st.sampled_from(_real_ids(live, op_id) + UNKNOWN_IDS))
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for ids in id_kinds:
                try:
                    fuzzer(op_id, _strategy(op, mode, ids, live["files"], live["value_files"]))()
                except Unsatisfiable:  # nothing to make invalid but the token: tested below
                    nothing_to_negate.add(op_id)

    # Without the token, or with a wrong one, every operation is refused.
    for op in operations:
        op_id = op.definition.raw["operationId"]
        fixed = {"id": live["done"], "path": "out/result.txt", "name": "answer.pkl"} if "{id}" in op.path else None
        case = _plain_case(op, op_id, fixed)
        for headers in ({}, {"Authorization": "token wrong"}):
            examples[op_id + " (no token)"] += 1
            kwargs = case.as_transport_kwargs()
            sent = {k: v for k, v in kwargs.pop("headers").items() if k.lower() != "authorization"}
            response = requests.request(**kwargs, headers={**sent, **headers}, timeout=60)
            statuses[(op_id + " (no token)", response.status_code)] += 1
            if response.status_code != 403:
                fail((op_id, f"token {headers or 'missing'}: not refused", response.status_code),
                     f"{case.method} {response.request.url}", f"{response.status_code} {response.text[:200]!r}")  # fmt: skip

    # Clean up: cancel every job the fuzz created; none of them may have started.
    created = [j for j in client.jobs() if j["id"] not in before]
    for job in created:
        if job["state"] not in FINAL:
            client.cancel(job["id"])
    started = [j["id"] for j in client.jobs() if j["id"] not in before and j["started_at"]]
    live["gate"].touch()
    wait_state(client, live["blocker"], FINAL, timeout=60)

    total = sum(examples.values())
    print(f"\nfuzz: {total} requests, {len(server_errors)} 5xx, {sum(failures.values())} failed checks "
          f"({len(failures)} kinds); {len(created)} jobs created by the fuzz (cancelled), {len(started)} "
          f"of them started")  # fmt: skip
    if nothing_to_negate:
        print(f"  no negative data possible (only the token) for: {', '.join(sorted(nothing_to_negate))}")
    for op_id in sorted({k[0] for k in statuses}):
        print(f"  {op_id:32} " + ", ".join(f"{s}: {n}" for (o, s), n in sorted(statuses.items()) if o == op_id))
    report = [f"{n} x {op_id} -> {status}: {what}\n    {first[(op_id, what, status)]}"
              for (op_id, what, status), n in sorted(failures.items(), key=str)]  # fmt: skip
    for line in report:
        print("FAILED", line)
    log = server.log_text()
    traceback = log.find("Traceback")
    assert total >= len(operations) * EXAMPLES
    assert statuses[("submitJob", 201)] and statuses[("downloadFile", 200)] >= len(live["files"])
    assert statuses[("downloadValueFile", 200)] >= len(live["value_files"])
    assert not server_errors, f"{len(server_errors)} 5xx: {Counter(server_errors)}"
    assert not failures, "\n".join(report)
    assert not started, f"jobs the fuzz submitted started: {started}"
    assert traceback < 0, log[max(0, traceback - 300) : traceback + 3000]


def _real_ids(live: dict, op_id: str) -> list[str]:
    """The real jobs an operation is sent to: an ended one, a queued one and, unless it would
    cancel or copy it, the running blocker."""
    ended = live["spare"] if op_id in DELETES else live["done"]
    return [ended, live["waiting"]] + ([] if op_id in WRITES else [live["blocker"]])


def _plain_case(op, op_id: str, path_parameters: dict | None):
    """A valid request without fuzz (a submit of the one-cell notebook, queued behind the blocker)."""
    submit = {"path": "noop.ipynb", "gpus": 1, "name": "plain"}
    body = {"submitJob": submit, "checkSubmit": submit, "resubmitJob": {"gpus": 1}, "checkResubmit": {"gpus": 1}}
    if op_id in body:
        return op.Case(path_parameters=path_parameters, body=body[op_id])
    return op.Case(path_parameters=path_parameters)


def _strategy(op, mode, ids, files: list[str], value_files: list[str]):
    """Cases for ``op`` (with ``{id}`` from ``ids`` when given, and ``{path}`` or ``{name}``
    often a real file), each with a sane request (or None) and a GPU count for the submits."""
    sane = st.none() if mode == GenerationMode.NEGATIVE else st.one_of(st.none(), SANE)
    gpus = st.sampled_from([1, 2])
    if ids is None:
        return st.tuples(op.as_strategy(generation_mode=mode), sane, gpus)
    choices = {"path": files + ODD_PATHS, "name": value_files + ODD_NAMES}
    key = next((k for k in choices if "{" + k + "}" in op.path), None)
    picked = st.sampled_from(choices[key]) if key else st.none()

    def with_ids(pair):
        job_id, file = pair
        fixed = {"id": job_id} if file is None else {"id": job_id, key: file}
        return op.as_strategy(generation_mode=mode, path_parameters=fixed)

    return st.tuples(st.tuples(ids, picked).flatmap(with_ids), sane, gpus)


def _harmless(body, root: Path, sane: dict | None, gpus: int, resubmit: bool):
    """The fuzzed body, made harmless (see the module's docstring)."""
    if not isinstance(body, dict):
        return body
    body = dict(body)
    data = body.get("data")
    if isinstance(data, list):
        body["data"] = ["input.csv" if isinstance(d, str) and d and _exists(root, d) else d for d in data]
    elif isinstance(data, str) and data and _exists(root, data):
        body["data"] = "input.csv"
    if sane is not None:
        for key in FREE_FORM + CONTAINER_ONLY + (() if resubmit else ("notebook", "notebook_name", "data")):
            body.pop(key, None)
        body.update(sane)
        if not resubmit:
            body["path"] = "noop.ipynb"
    if resubmit or sane is not None:
        count = body.get("gpus")
        if count is None or (not isinstance(count, bool) and _below_one(count)):
            body["gpus"] = gpus  # 0 GPUs would start at once
    return body


def _below_one(value) -> bool:
    try:
        return float(value) < 1
    except (TypeError, ValueError):
        return False


def _exists(root: Path, item: str) -> bool:
    try:
        path = Path(item).expanduser()
        return (path if path.is_absolute() else root / path).exists()
    except (OSError, ValueError, RuntimeError):
        return True  # odd enough to replace


def _query_fields(case) -> int:
    query = case.query if isinstance(case.query, dict) else {}
    return sum(len(v) if isinstance(v, list) else 1 for v in query.values())


def _url(case) -> str:
    kwargs = case.as_transport_kwargs()
    return requests.Request(kwargs["method"], kwargs["url"], params=kwargs.get("params")).prepare().url


def _unset(value) -> bool:
    return value is None or type(value).__name__ == "NotSet"
