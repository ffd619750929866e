"""The REST additions the JupyterLab UI needs: who the caller is, and resubmitting a job (or
checking what a resubmit would give)."""

from __future__ import annotations

import getpass

import pytest
from support import wait_state, write_notebook

from e31_jupyter.core.errors import E31Error


def resubmit(client, job_id: str, **changes) -> dict:
    return client._json("POST", f"jobs/{job_id}/resubmit", json=changes)


def test_info_names_the_caller(client):
    info = client.info()
    assert info["user"] == getpass.getuser()
    assert info["admin"] is False
    assert info["version"]


def test_resubmit_runs_the_stored_notebook_again_with_changes(client, tmp_path):
    data = tmp_path / "input.txt"
    data.write_text("first")
    notebook = write_notebook(
        tmp_path / "echo.ipynb",
        'print(open("input.txt").read(), a, b)',
        parameters="a = 1\nb = 'x'",
    )
    first = client.submit(
        path=str(notebook), data=[str(data)], parameters={"a": 2}, name="echo", team="vision",
        max_runtime="1h", outputs=["*.txt"],
    )  # fmt: skip
    wait_state(client, first["id"], "succeeded")
    notebook.write_text("{}")  # later edits of the file do not change what a resubmit runs
    data.write_text("second")  # data is copied again from where it was

    checked = client._json("POST", f"jobs/{first['id']}/resubmit/check", json={"parameters": {"c": 1}, "gpus": 1})
    assert checked["submitted"] is False and checked["name"] == "echo" and checked["queue_position"] == 1
    assert checked["work"]["parameters"] == {"a": 2, "c": 1} and checked["request"]["gpus"] == 1
    assert any("Parameter 'c' is not set" in w for w in checked["warnings"]), checked["warnings"]
    assert [j["id"] for j in client.jobs()] == [first["id"]]  # nothing submitted
    with pytest.raises(E31Error) as refused:
        client._json("POST", f"jobs/{first['id']}/resubmit/check", json={"path": "/etc/passwd"})
    assert refused.value.status == 400 and "path" in refused.value.message

    again = resubmit(client, first["id"], parameters={"b": "y"}, gpus=1, deadline="+2h")
    assert again["id"] != first["id"]
    assert again["name"] == "echo" and again["team"] == "vision"
    assert again["work"]["parameters"] == {"a": 2, "b": "y"}
    assert again["request"]["gpus"] == 1 and again["request"]["max_runtime_s"] == 3600
    assert again["request"]["deadline"] is not None
    assert again["output"]["files"] == ["*.txt"]
    done = wait_state(client, again["id"], "succeeded")
    assert "second 2 y" in client.log_tail(done["id"])


def test_resubmit_carries_no_deadline_and_refuses_unknown_changes(client, tmp_path):
    notebook = write_notebook(tmp_path / "n.ipynb", "1")
    first = client.submit(path=str(notebook), deadline="+3h", gpus=0)
    client.cancel(first["id"])
    again = resubmit(client, first["id"])
    assert again["request"]["deadline"] is None and again["state"] in ("queued", "running", "succeeded")
    with pytest.raises(E31Error) as refused:
        resubmit(client, first["id"], path="/etc/passwd")
    assert refused.value.status == 400 and "path" in refused.value.message
    with pytest.raises(E31Error) as missing:
        resubmit(client, "no-such-job")
    assert missing.value.status == 404
