"""After the notebook has run: a report, a file or a value that cannot be handed back never
turns a finished job into a failed or lost one. Each step fails for real here (a Python without
nbconvert's templates, an image without them, a value pickle refuses, files the job's user cannot
read); the job ends ``succeeded`` and its record, log, API and ``e31 status`` say what failed.
The Docker image check runs the way a job runs: with the job mounts, user and environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import wait_for, wait_state, write_notebook
from docker_fixtures import FULL_IMAGE, JOB_PACKAGES, package_files, python_files, shared_libraries, write_root_tarball
from server_process import ServerProcess

from e31_jupyter.cli import main
from e31_jupyter.client import E31Client
from e31_jupyter.execution.backends.docker import DockerBackend
from e31_jupyter.notebook.job_notebook import cell_notebook

NO_TEMPLATES_IMAGE = "e31-test:no-templates"
SLIM_IMAGE = "e31-test:slim"  # libraries and a shell: Python comes from a mount
PYTHON_PREFIX = Path(sys.base_prefix)


def status_text(server, job_id: str, capsys) -> str:
    capsys.readouterr()
    assert main(["--url", server.url, "--token", server.token, "status", job_id]) == 0
    return capsys.readouterr().out


# --- a local job -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def python_without_templates(tmp_path_factory) -> Path:
    """A virtual environment of this Python: the same packages, but nbconvert looks for its
    templates under the environment's own prefix, where there are none."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


class ServerOn(ServerProcess):
    """An e31 server run by another Python: its local jobs run on that Python too."""

    python = ""

    def command(self) -> list[str]:
        return [self.python, *super().command()[1:]]


@pytest.fixture
def server_without_templates(python_without_templates, tmp_path):
    server = ServerOn(tmp_path / "data", root_dir=tmp_path)
    server.python = str(python_without_templates)
    yield server.start()
    server.stop()


@pytest.mark.slow
def test_a_report_that_cannot_be_rendered_leaves_the_job_succeeded_and_says_why(
    server_without_templates, tmp_path, capsys
):
    server = server_without_templates
    client = E31Client(server.url, server.token)
    notebook = write_notebook(tmp_path / "work.ipynb", "open('out.txt', 'w').write('done')")
    job = wait_state(client, client.submit(path=str(notebook))["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    [failure] = job["after_work_failures"]
    assert failure["step"] == "report"
    assert failure["reason"].startswith(
        "HTML report failed: nbconvert has no template 'lab' in this Python environment"
    )
    assert "pip install --force-reinstall nbconvert" in failure["reason"]
    assert "HTML report failed" in job["reason"]  # the history says it too
    assert job["output"]["reports"] == [] and job["files_count"] == 1  # the files came back all the same
    assert client.download(job["id"], "out.txt") == b"done"
    assert "e31: after the notebook, report: HTML report failed" in client.log_tail(job["id"], 50)
    shown = status_text(server, job["id"], capsys)
    assert "succeeded (after it, failed: report)" in shown
    assert "  report: HTML report failed: nbconvert has no template 'lab'" in shown
    with pytest.raises(Exception, match="has no HTML report: HTML report failed: nbconvert has no template 'lab'"):
        client.report(job["id"])
    collected = client.collect(job["id"], tmp_path / "collected")  # no report to bring back: not an error
    assert (collected / "files" / "out.txt").exists() and not list(collected.glob("*.html"))


def test_report_none_asks_for_no_report(server, tmp_path, capsys):
    client = E31Client(server.url, server.token)
    notebook = write_notebook(tmp_path / "quiet.ipynb", "x = 1")
    capsys.readouterr()
    argv = ["--url", server.url, "--token", server.token, "submit", str(notebook), "--report", "none", "--wait"]
    assert main(argv) == 0
    [job] = client.jobs()
    assert job["state"] == "succeeded" and job["after_work_failures"] == []
    assert job["output"]["reports"] == []
    assert not (server.data_dir / "jobs" / job["id"] / "report.html").exists()
    again = wait_state(client, client.resubmit(job["id"], reports=["html"])["id"], "succeeded", "failed")
    assert again["output"]["reports"] == ["html"] and "<html" in client.report(again["id"])
    with pytest.raises(Exception, match="'none' asks for no report"):
        client.submit(path=str(notebook), reports=["none", "html"])


def test_values_that_cannot_be_saved_are_listed_and_the_job_succeeds(server, tmp_path, capsys):
    """A cell job's results: a lock cannot be pickled (left out, said why); and a job that left
    a file where its values go makes the saving cell itself fail."""
    client = E31Client(server.url, server.token)
    lock_cell = cell_notebook("import threading\nlock = threading.Lock()\nn = 3", [], [], ["lock", "n"], "python3")
    nbformat.write(nbformat.from_dict(lock_cell), tmp_path / "lock.ipynb")
    job = wait_state(client, client.submit(path=str(tmp_path / "lock.ipynb"))["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    [failure] = job["after_work_failures"]
    assert failure["step"] == "values" and failure["reason"].startswith("lock (")
    assert "cannot be handed back from the job" in failure["reason"]
    assert sorted(job["values"]) == ["lock", "n"]  # the index lists both; lock says it was skipped

    blocked = cell_notebook(
        "import os\nopen(os.path.join(os.environ['E31_JOB_DIR'], 'values'), 'w').close()\nn = 3",
        [], [], ["n"], "python3",
    )  # fmt: skip
    nbformat.write(nbformat.from_dict(blocked), tmp_path / "blocked.ipynb")
    job = wait_state(client, client.submit(path=str(tmp_path / "blocked.ipynb"))["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    [failure] = job["after_work_failures"]
    assert failure["step"] == "values"
    assert failure["reason"].startswith("the values were not saved: FileExistsError")
    assert "values: the values were not saved" in status_text(server, job["id"], capsys)


# --- a Docker job ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def images(engine):
    """e31-test:no-templates (e31-test:full without nbconvert's templates) and e31-test:slim
    (the shared libraries Python needs, and no Python)."""
    remover = engine.client.containers.run(
        FULL_IMAGE,
        ["python3", "-c", "import shutil, sys; shutil.rmtree(sys.prefix + '/share/jupyter/nbconvert/templates')"],
        detach=True,
    )
    assert remover.wait()["StatusCode"] == 0, remover.logs()
    repository, tag = NO_TEMPLATES_IMAGE.split(":")
    remover.commit(repository=repository, tag=tag)
    remover.remove()
    libraries = shared_libraries(python_files() + package_files(JOB_PACKAGES))
    tarball = engine.root / "slim.tar"
    write_root_tarball(tarball, libraries + [Path("/bin/sh")])
    repository, tag = SLIM_IMAGE.split(":")
    engine.client.api.import_image(src=str(tarball), repository=repository, tag=tag, changes=["ENV LANG=C.UTF-8"])
    tarball.unlink()
    return engine


@pytest.fixture
def start_docker_server(images, start_server, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", images.host)

    def start(*options: str):
        return start_server(extra_args=["--E31.backend=docker", *options])

    return start


def test_a_docker_job_whose_report_and_files_fail_ends_succeeded_naming_the_image(
    start_docker_server, tmp_path, capsys
):
    server = start_docker_server(f"--E31.docker_image={NO_TEMPLATES_IMAGE}")
    client = E31Client(server.url, server.token)
    notebook = write_notebook(
        tmp_path / "writes.ipynb",
        "import os\n"
        "open('result.csv', 'w').write('a,b\\n')\n"
        "open('secret.csv', 'w').write('x'); os.chmod('secret.csv', 0)\n"  # unreadable to its own user
        "os.mkdir('private'); open('private/inner.txt', 'w').write('y'); os.chmod('private', 0)",
    )
    job = wait_state(client, client.submit(path=str(notebook))["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    failures = {f["step"]: f["reason"] for f in job["after_work_failures"]}
    assert set(failures) == {"files", "report"}
    assert failures["report"].startswith(
        f"HTML report failed: nbconvert has no template 'lab' in the image {NO_TEMPLATES_IMAGE!r}"
    )
    assert "secret.csv: Permission denied" in failures["files"] and "private/: Permission denied" in failures["files"]
    assert [f["path"] for f in client.files(job["id"])] == ["result.csv"]
    log = client.log_tail(job["id"], 50)
    assert "e31: after the notebook, files:" in log and "e31: after the notebook, report:" in log
    shown = status_text(server, job["id"], capsys)
    assert "succeeded (after it, failed: report, files)" in shown and NO_TEMPLATES_IMAGE in shown
    # said at the start too, before any job waited for the image
    assert f"jobs in the image {NO_TEMPLATES_IMAGE!r} will have no HTML report" in server.log_text()


def test_an_image_that_runs_python_from_a_read_only_mount_is_accepted_and_runs_jobs(start_docker_server, tmp_path):
    python = PYTHON_PREFIX / "bin" / "python3"
    server = start_docker_server(
        f"--E31.docker_image={SLIM_IMAGE}", f"--E31.docker_mounts={PYTHON_PREFIX}", f"--E31.docker_python={python}"
    )
    client = E31Client(server.url, server.token)
    notebook = write_notebook(tmp_path / "mounted.ipynb", "import sys\nopen('where.txt', 'w').write(sys.prefix)")
    job = wait_state(client, client.submit(path=str(notebook))["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    assert job["after_work_failures"] == []
    assert client.download(job["id"], "where.txt").decode() == str(PYTHON_PREFIX)
    assert "cannot run e31 jobs" not in server.log_text() and "no HTML report" not in server.log_text()


def test_the_probe_runs_with_the_job_mounts_and_says_what_an_image_lacks(images, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", images.host)
    python = str(PYTHON_PREFIX / "bin" / "python3")
    mounted = DockerBackend(image=SLIM_IMAGE, mounts=[str(PYTHON_PREFIX)], python=python).probe(SLIM_IMAGE)
    assert mounted["cannot_run"] == [] and mounted["report"] == ""
    unmounted = DockerBackend(image=SLIM_IMAGE, python=python).probe(SLIM_IMAGE)
    assert "no such file or directory" in unmounted["cannot_run"][0]
    no_templates = DockerBackend(image=NO_TEMPLATES_IMAGE).probe(NO_TEMPLATES_IMAGE)
    assert no_templates["cannot_run"] == []
    assert no_templates["report"].startswith(f"nbconvert has no template 'lab' in the image {NO_TEMPLATES_IMAGE!r}")


def test_an_unusable_default_image_is_said_at_start_and_the_server_still_serves(start_docker_server, tmp_path):
    from docker_fixtures import BARE_IMAGE

    server = start_docker_server(f"--E31.docker_image={BARE_IMAGE}")
    said = wait_for(
        lambda: f"the image {BARE_IMAGE!r} cannot run e31 jobs" in server.log_text(), what="the start's image check"
    )
    assert said
    log = server.log_text()
    assert "No module named 'papermill'" in log and "pip install papermill ipykernel nbconvert" in log
    assert "Traceback" not in log
    assert E31Client(server.url, server.token).jobs() == []  # the server serves
