"""Bad input gets a 4xx with a clear JSON message, and nothing in the queue is lost or changed."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
import requests
from conftest import wait_state, write_notebook
from nbformat.v4 import new_code_cell, new_notebook
from shared_server import server, shared_server  # noqa: F401 (fixtures: one server, a user per test)

from e31_jupyter.core.errors import E31Error


@pytest.fixture
def api(server):
    """Raw HTTP against the server, so the tests see exactly what any client would get."""

    def call(method: str, path: str, token: str | None = server.token, **kwargs) -> requests.Response:
        headers = {"Authorization": f"token {token}"} if token else {}
        url = f"{server.url}/e31/api/{path}"
        return requests.request(method, url, headers=headers, timeout=30, **kwargs)

    return call


@pytest.fixture
def busy_queue(client, gated):
    """A running job holding both GPUs and a queued one behind it."""
    running = wait_state(client, gated.submit(client, "r", gpus=2)["id"], "running")
    queued = gated.submit(client, "q", gpus=1)
    yield running, queued
    gated.open("r")
    gated.open("q")


def _queue_state(client) -> list[tuple]:
    return sorted((j["id"], j["state"], j["queue_position"], tuple(j["gpus"])) for j in client.jobs())


def _refused(response: requests.Response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    message = response.json()["message"]
    assert "Traceback" not in message
    for word in words:
        assert word in message, message
    return message


def _inline(path: str) -> dict:
    return json.loads(Path(path).read_text())


def _bad_submits(tmp_path):
    good = str(write_notebook(tmp_path / "ok.ipynb", "x = 1"))
    junk = tmp_path / "junk.ipynb"
    junk.write_text("{ this is not json")
    other_kernel = str(write_notebook(tmp_path / "r.ipynb", "x <- 1", kernel="ir"))
    return [
        ({"notebook": "{ not json"}, ["notebook", "not valid JSON"]),
        ({"notebook": {"cells": "nope"}}, ["not a valid notebook"]),
        ({"path": str(junk)}, ["junk.ipynb", "not valid notebook JSON"]),
        ({"path": str(tmp_path / "missing.ipynb")}, ["no notebook file"]),
        ({"path": "~nobody-here-e31/a.ipynb"}, ["path", "home folder", "full path"]),
        ({"path": good, "data": ["~nobody-here-e31/data"]}, ["data", "home folder"]),
        ({"path": other_kernel}, ["kernel 'ir'", "Available kernels", "python3"]),
        ({"path": good, "gpus": -1}, ["gpus", "0 or more", "2 GPU(s): 0, 1"]),
        ({"path": good, "gpus": 3}, ["gpus", "2 GPU(s): 0, 1"]),
        ({"path": good, "gpus": "two"}, ["gpus", "whole number"]),
        ({"path": good, "deadline": "2020-01-01T00:00:00"}, ["deadline", "in the past"]),
        ({"path": good, "deadline": "tomorrow-ish"}, ["deadline", "ISO 8601"]),
        ({"path": good, "max_runtime": "forever"}, ["max_runtime", "90m"]),
        ({"path": good, "expected_runtime": "5x"}, ["expected_runtime", "duration"]),
        ({"path": good, "outputs": ["../../etc/*"]}, ["outputs", "outside"]),
        ({"path": good, "reports": ["pdf"]}, ["reports", "pdf"]),
        ({"path": good, "parameters": {"not a name": 1}}, ["parameters"]),
        ({"path": good, "data": [str(tmp_path / "nothing-here")]}, ["data", "nothing at"]),
        ({"path": good, "gpu": 1}, ["Unknown field", "gpu"]),
        ({"path": good, "notebook": {}}, ["exactly one of path"]),
        ({"path": good, "folder": str(tmp_path)}, ["folder goes with notebook"]),
        ({"notebook": _inline(good), "folder": str(tmp_path / "nowhere")}, ["folder", "not a folder"]),
        ({"path": good, "after": "261201-00000000"}, ["after", "no job '261201-00000000'"]),
        ({"path": good, "after": [3]}, ["after", "list of job ids"]),
        ({"path": good, "after": [f"j{i}" for i in range(101)]}, ["after", "at most 100"]),
    ]


def test_bad_submits_are_refused_with_a_reason_and_change_nothing(client, api, busy_queue, server, tmp_path):
    before = _queue_state(client)
    jobs_dir = list((server.data_dir / "jobs").iterdir())
    for body, words in _bad_submits(tmp_path):
        _refused(api("POST", "jobs", json=body), 400, *words)
    _refused(api("POST", "jobs", data=b"[1, 2"), 400, "not valid JSON")
    _refused(api("POST", "jobs", json=[1, 2]), 400, "JSON object")
    assert _queue_state(client) == before
    assert list((server.data_dir / "jobs").iterdir()) == jobs_dir  # no half-made job directory


def test_unknown_job_and_escaping_paths_are_not_found(client, api, busy_queue):
    running, _ = busy_queue
    for path in ("jobs/nosuchjob", "jobs/nosuchjob/log", "jobs/nosuchjob/files"):
        _refused(api("GET", path), 404, "nosuchjob")
    _refused(api("POST", "jobs/nosuchjob/cancel"), 404, "nosuchjob")
    for escape in ("..%2Fspec.json", "..%2F..%2F..%2Fe31.sqlite", "%2Fetc%2Fpasswd", "a%2F..%2F..%2Fspec.json"):
        _refused(api("GET", f"jobs/{running['id']}/files/{escape}"), 404, "No collected file")


def test_requests_without_a_valid_token_are_refused(api, busy_queue):
    for token in (None, "wrong-token"):
        assert api("GET", "jobs", token=token).status_code == 403
        assert api("POST", "jobs", token=token, json={"notebook": {}}).status_code == 403
        assert api("POST", f"jobs/{busy_queue[0]['id']}/cancel", token=token).status_code == 403
    assert api("GET", f"jobs/{busy_queue[0]['id']}")
    assert api("GET", f"jobs/{busy_queue[0]['id']}").json()["state"] == "running"


def test_query_arguments_are_checked(api, busy_queue):
    _refused(api("GET", "jobs?state=sleeping"), 400, "state", "queued")
    _refused(api("GET", f"jobs/{busy_queue[0]['id']}/log?offset=-3"), 400, "offset")
    _refused(api("GET", "meter?since=yesterday"), 400, "since", "ISO 8601")


def test_bad_updates_are_refused_with_a_reason_and_change_nothing(client, api, busy_queue):
    running, queued = busy_queue
    before, history = _queue_state(client), client.job(queued["id"])["transitions"]
    for body, status, words in [
        ({}, 400, ["Say what to change"]),
        ([1], 400, ["JSON object"]),
        ({"parameters": {"a": 1}}, 400, ["Cannot change parameters", "resubmit"]),
        ({"gpus": 3}, 400, ["gpus", "at most 2"]),
        ({"gpus": -1}, 400, ["gpus"]),
        ({"expected_runtime": "3d"}, 400, ["longer than max_runtime"]),
        ({"max_runtime": "soon"}, 400, ["max_runtime", "duration"]),
        ({"deadline": "1999-01-01"}, 400, ["in the past"]),
        ({"name": ""}, 400, ["name"]),
    ]:
        _refused(api("PATCH", f"jobs/{queued['id']}", json=body), status, *words)
    _refused(api("PATCH", f"jobs/{running['id']}", json={"gpus": 1}), 409, "running", "only a queued job")
    _refused(api("PATCH", "jobs/no-such-job", json={"gpus": 1}), 404, "No job")
    assert _queue_state(client) == before and client.job(queued["id"])["transitions"] == history


def test_cancelling_a_finished_job_is_a_conflict(client, api, tmp_path):
    job = client.submit(path=str(write_notebook(tmp_path / "quick.ipynb", "x = 1")))
    wait_state(client, job["id"], "succeeded")
    _refused(api("POST", f"jobs/{job['id']}/cancel"), 409, "already ended")


def test_a_deadline_sooner_than_max_runtime_is_accepted_with_a_warning(client, tmp_path):
    nb = write_notebook(tmp_path / "quick.ipynb", "x = 1")
    job = client.submit(path=str(nb), deadline="+1h", max_runtime="6h")
    assert job["state"] in ("queued", "running")
    assert any("expected_runtime" in w for w in job["warnings"])


def test_a_misspelt_parameter_runs_with_a_warning_naming_the_likely_one(client, tmp_path):
    nb = write_notebook(tmp_path / "params.ipynb", "print(f'epochs={epochs}')", parameters="epochs = 10\nlr = 0.1")
    job = client.submit(path=str(nb), parameters={"epoch": 3, "lr": 0.5})
    assert job["warnings"] == [
        "Parameter 'epoch' is not set in the notebook's parameters cell: did you mean 'epochs'? It is "
        "passed all the same (papermill does), but the notebook may never read it; the cell sets epochs, lr."
    ]
    job = wait_state(client, job["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    executed = nbformat.reads(json.dumps(client.notebook(job["id"])), as_version=4)
    assert [o.get("text") for c in executed.cells for o in c.outputs] == ["epochs=10\n"]


def test_a_notebook_written_by_a_script_without_a_kernel_runs_on_python3_with_its_parameters(client, tmp_path):
    """nbformat's new_notebook() names no kernel and no language, which papermill needs to
    write parameters: such a notebook is taken for Python, as it is run on python3."""
    scripted = new_notebook(cells=[new_code_cell("epochs = 10", metadata={"tags": ["parameters"]})])
    scripted.cells.append(new_code_cell("print(f'epochs={epochs}')"))
    nbformat.write(scripted, tmp_path / "scripted.ipynb")
    job = client.submit(path=str(tmp_path / "scripted.ipynb"), parameters={"epochs": 3})
    assert job["warnings"] == []
    job = wait_state(client, job["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    executed = nbformat.reads(json.dumps(client.notebook(job["id"])), as_version=4)
    assert [o.get("text") for c in executed.cells for o in c.outputs] == ["epochs=3\n"]
    assert executed.metadata.kernelspec.name == "python3"
    scripted.metadata["language_info"] = {"name": "R"}
    nbformat.write(scripted, tmp_path / "scripted-r.ipynb")
    with pytest.raises(E31Error, match="names no kernel, and it is in 'R'"):
        client.submit(path=str(tmp_path / "scripted-r.ipynb"))


def test_parameters_for_a_notebook_without_a_parameters_cell_are_warned_about(client, tmp_path):
    nb = write_notebook(tmp_path / "untagged.ipynb", "epochs = 10")
    job = client.submit(path=str(nb), parameters={"epochs": 3})
    assert len(job["warnings"]) == 1 and "no cell tagged 'parameters'" in job["warnings"][0]
    assert client.submit(path=str(nb))["warnings"] == []


def test_a_file_the_job_will_not_have_is_named_at_submit_and_data_brings_it(client, tmp_path):
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "rows.csv").write_text("a,b\n1,2\n")
    nb = write_notebook(tmp_path / "reader.ipynb", "print(len(open('inputs/rows.csv').readlines()))")
    alone = client.submit(path=str(nb))
    assert len(alone["warnings"]) == 1 and "'inputs/rows.csv'" in alone["warnings"][0]
    assert "(--data inputs)" in alone["warnings"][0]
    assert "FileNotFoundError" in wait_state(client, alone["id"], "failed")["reason"]
    inline = client.submit(notebook=_inline(str(nb)), notebook_name="reader.ipynb", folder=str(tmp_path))
    assert "'inputs/rows.csv'" in inline["warnings"][0]
    assert client.submit(notebook=_inline(str(nb)), notebook_name="reader.ipynb")["warnings"] == []
    given = client.submit(path=str(nb), data=[str(tmp_path / "inputs")])
    assert given["warnings"] == []
    assert wait_state(client, given["id"], "succeeded", "failed")["state"] == "succeeded"


def test_a_cell_that_does_not_parse_is_named_at_submit(client, tmp_path):
    nb = write_notebook(tmp_path / "typo.ipynb", "print('fine')", "x = [1, 2\nprint(x)")
    job = client.submit(path=str(nb))
    assert job["warnings"] == [
        "Cell 2 ('x = [1, 2') is not valid Python (line 1: '[' was never closed): the job would stop there "
        "after its wait in line. Fix it and submit again."
    ]
    assert "SyntaxError" in wait_state(client, job["id"], "failed")["reason"]  # as the warning said


def test_a_module_beside_the_notebook_is_named_at_submit_and_data_brings_it(client, tmp_path):
    (tmp_path / "mylib.py").write_text("def double(x):\n    return 2 * x\n")
    nb = write_notebook(tmp_path / "importer.ipynb", "import mylib\nprint(mylib.double(21))")
    alone = client.submit(path=str(nb))
    assert len(alone["warnings"]) == 1 and "the module mylib (mylib.py, next to the notebook)" in alone["warnings"][0]
    assert "(--data mylib.py)" in alone["warnings"][0]
    assert "No module named 'mylib'" in wait_state(client, alone["id"], "failed")["reason"]
    given = client.submit(path=str(nb), data=[str(tmp_path / "mylib.py")])
    assert given["warnings"] == []
    assert wait_state(client, given["id"], "succeeded", "failed")["state"] == "succeeded"
    executed = nbformat.reads(json.dumps(client.notebook(given["id"])), as_version=4)
    assert [o.get("text") for c in executed.cells for o in c.outputs] == ["42\n"]


def test_downloads_and_reports_say_what_they_are(client, api, tmp_path):
    nb = write_notebook(
        tmp_path / "typed.ipynb", "open('empty.txt', 'w').close()\nopen('data.bin', 'wb').write(b'x' * 10)"
    )
    job = wait_state(client, client.submit(path=str(nb))["id"], "succeeded")
    report = api("GET", f"jobs/{job['id']}/report")
    assert report.headers["Content-Type"].startswith("text/html")
    assert "sandbox" in report.headers["Content-Security-Policy"]
    for name in ("empty.txt", "data.bin"):
        download = api("GET", f"jobs/{job['id']}/files/{name}")
        assert download.headers["Content-Type"] == "application/octet-stream", name
        assert download.headers["Content-Disposition"].startswith("attachment")


def test_data_that_holds_the_queue_or_links_past_the_limit_is_refused(start_server, tmp_path):
    server = start_server(extra_args=["--E31.max_input_bytes=100000"])
    from e31_jupyter.client import E31Client

    client = E31Client(server.url, server.token)
    nb = str(write_notebook(tmp_path / "x.ipynb", "x = 1"))
    for data in (str(tmp_path), "/"):
        with pytest.raises(Exception, match="data"):
            client.submit(path=nb, data=[data])
    big = tmp_path / "big.bin"
    big.write_bytes(b"0" * 1_000_000)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "big.bin").symlink_to(big)
    job = client.submit(path=nb, data=[str(linked)])  # a link is copied as a link: a few bytes
    work = server.data_dir / "jobs" / job["id"] / "work" / "linked"
    assert (work / "big.bin").is_symlink()
    assert [j["id"] for j in client.jobs()] == [job["id"]]
