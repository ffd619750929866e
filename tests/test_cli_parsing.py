"""The CLI's pure parts: argument parsing, value typing, formatting, and collect's path safety."""

import os
import time
from datetime import datetime, timedelta, timezone

import pytest

from e31_jupyter.cli import main
from e31_jupyter.cli.arguments import (
    as_typed_here,
    parameter_value,
    read_argv,
    split_assignments,
    submit_bodies,
    submit_body,
)
from e31_jupyter.cli.launch import launcher_argv
from e31_jupyter.cli.listing import describe, format_jobs, format_table
from e31_jupyter.cli.parser import build_parser
from e31_jupyter.client import safe_destination
from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.core.text import format_gpu_hours, format_moment, format_seconds, format_until, name_gpus
from e31_jupyter.magics import _cell_parser

PARAMETER_TEXTS = ["3", "-2", "0.5", "1e-3", "nan", "True", "False", "None", "true", "none", "abc", "", "1_0"]


@pytest.mark.parametrize("text", PARAMETER_TEXTS)
def test_parameter_values_are_typed_as_papermill_types_them(text):
    papermill_cli = pytest.importorskip("papermill.cli")
    expected = papermill_cli._resolve_type(text)
    value = parameter_value(text)
    assert type(value) is type(expected)
    assert value == expected or value != value  # nan


def test_submit_body_sends_absolute_paths_typed_parameters_and_only_given_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(
        [
            "submit",
            "nb.ipynb",
            "-p",
            "lr",
            "0.1",
            "-p",
            "epochs",
            "3",
            "-p",
            "tag",
            "v1",
            "--gpus",
            "2",
            "--max-runtime",
            "6h",
            "--expected-runtime",
            "5400",
            "--data",
            "in/a.csv",
            "--data",
            "/abs/dir",
            "--output",
            "*.pt",
            "--report",
            "html",
        ]
    )
    assert submit_body(args) == {
        "path": os.path.join(str(tmp_path), "nb.ipynb"),
        "parameters": {"lr": 0.1, "epochs": 3, "tag": "v1"},
        "data": [os.path.join(str(tmp_path), "in", "a.csv"), "/abs/dir"],
        "gpus": 2,
        "max_runtime": "6h",
        "expected_runtime": 5400,
        "outputs": ["*.pt"],
        "reports": ["html"],
    }


def test_a_parameter_is_given_as_name_and_value_or_as_name_equals_value():
    argv = ["submit", "nb.ipynb", "-p", "lr=0.1", "--parameters", "tag=a=b", "-p", "epochs", "3", "--name", "x=y"]
    assert split_assignments(argv) == [
        "submit", "nb.ipynb", "-p", "lr", "0.1", "--parameters", "tag", "a=b", "-p", "epochs", "3", "--name", "x=y"
    ]  # fmt: skip
    args = build_parser().parse_args(split_assignments(argv))
    assert submit_body(args)["parameters"] == {"lr": 0.1, "tag": "a=b", "epochs": 3}
    assert split_assignments(["submit", "nb.ipynb", "-p"]) == ["submit", "nb.ipynb", "-p"]  # argparse says what lacks
    assert split_assignments(["-p", "not a name=1"]) == ["-p", "not a name=1"]


@pytest.mark.parametrize("day", ["tomorrow", "today", "Tomorrow"])
@pytest.mark.parametrize("clock", ["8am", "08:00", "8:30pm"])
def test_a_deadline_of_a_day_and_a_clock_time_may_be_typed_without_quotes(day, clock):
    argv = read_argv(["submit", "nb.ipynb", "--deadline", day, clock, "--gpus", "1"])
    assert build_parser().parse_args(argv).deadline == f"{day} {clock}"
    magic = _cell_parser().parse_args(read_argv(["--deadline", day, clock, "--gpus", "1"]))
    assert magic.deadline == f"{day} {clock}" and magic.gpus == 1


def test_only_a_clock_time_after_a_day_is_taken_into_the_deadline():
    for argv in (
        ["submit", "--deadline", "tomorrow", "nb.ipynb"],
        ["submit", "nb.ipynb", "--name", "tomorrow", "8am"],
        ["submit", "--deadline", "08:00", "8am"],
    ):
        assert read_argv(argv) == argv
    assert read_argv(["submit", "-p", "when=tomorrow", "--deadline", "+6h"]) == [
        "submit", "-p", "when", "tomorrow", "--deadline", "+6h"
    ]  # fmt: skip


def test_parameters_from_a_json_file_and_yaml_mix_with_p_and_r_a_later_kind_winning(tmp_path):
    (tmp_path / "p.json").write_text('{"a": 1, "b": [1, 2], "c": {"d": null}}')
    (tmp_path / "empty.yaml").write_text("# nothing set\n")
    argv = ["submit", "nb.ipynb", "-r", "a", "7", "-p", "a", "5", "-y", "a: 3\nb: []", "-f", str(tmp_path / "p.json"),
            "-f", str(tmp_path / "empty.yaml")]  # fmt: skip
    assert submit_body(build_parser().parse_args(argv))["parameters"] == {"a": "7", "b": [], "c": {"d": None}}


def test_the_data_a_warning_suggests_is_written_from_the_folder_the_command_is_typed_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    answer = {"id": "x", "warnings": ["The job will not have ... (--data data --data 'my rows.csv') if ...", "other"]}
    below = as_typed_here(answer, str(tmp_path / "exp" / "train.ipynb"))
    assert below["warnings"] == ["The job will not have ... (--data exp/data --data 'exp/my rows.csv') if ...", "other"]
    assert below["id"] == "x" and answer["warnings"][0].endswith("(--data data --data 'my rows.csv') if ...")
    (tmp_path / "exp").mkdir()
    monkeypatch.chdir(tmp_path / "exp")
    assert as_typed_here(answer, str(tmp_path / "exp" / "train.ipynb")) == answer  # typed beside the notebook
    beside = as_typed_here(answer, str(tmp_path / "other" / "train.ipynb"))
    assert "(--data ../other/data --data '../other/my rows.csv')" in beside["warnings"][0]


def test_submit_body_of_a_bare_notebook_lets_the_server_choose_defaults():
    args = build_parser().parse_args(["submit", "/nb/train.ipynb"])
    assert submit_body(args) == {"path": "/nb/train.ipynb"}


def test_a_sweep_is_one_body_per_combination_named_after_it():
    args = build_parser().parse_args(
        ["submit", "/nb/train.ipynb", "-p", "epochs", "3", "--gpus", "1", "--sweep", "lr", "0.1", "0.01",
         "--sweep", "opt", "adam", "sgd"]
    )  # fmt: skip
    bodies = submit_bodies(args)
    assert [(b["name"], b["parameters"]) for b in bodies] == [
        ("train[lr=0.1,opt=adam]", {"epochs": 3, "lr": 0.1, "opt": "adam"}),
        ("train[lr=0.1,opt=sgd]", {"epochs": 3, "lr": 0.1, "opt": "sgd"}),
        ("train[lr=0.01,opt=adam]", {"epochs": 3, "lr": 0.01, "opt": "adam"}),
        ("train[lr=0.01,opt=sgd]", {"epochs": 3, "lr": 0.01, "opt": "sgd"}),
    ]
    assert all(b["gpus"] == 1 and b["path"] == "/nb/train.ipynb" for b in bodies)
    named = build_parser().parse_args(["submit", "/nb/train.ipynb", "--name", "run", "--sweep", "seed", "1", "2"])
    assert [b["name"] for b in submit_bodies(named)] == ["run[seed=1]", "run[seed=2]"]
    assert submit_bodies(build_parser().parse_args(["submit", "/nb/train.ipynb"])) == [{"path": "/nb/train.ipynb"}]
    in_one = build_parser().parse_args(
        ["submit", "/nb/train.ipynb", "--sweep", "lr=0.1,0.01", "--sweep", "opt", "adam"]
    )
    assert [b["parameters"] for b in submit_bodies(in_one)] == [{"lr": 0.1, "opt": "adam"}, {"lr": 0.01, "opt": "adam"}]


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--sweep", "lr"], "no values"),
        (["--sweep", "lr="], "no values"),
        (["--sweep", "lr=0.1", "0.2"], r"--sweep lr=0.1 0.2: give the name, then each value \(--sweep lr 1 2 3\)"),
        (["--sweep", "lr", "1", "--sweep", "lr=2"], "given twice"),
        (["--sweep", "lr", "1", "--sweep", "lr", "2"], "given twice"),
        (["-p", "lr", "1", "--sweep", "lr", "2", "3"], "both swept"),
        (["--sweep", "a", *map(str, range(30)), "--sweep", "b", *map(str, range(30))], "900 jobs"),
    ],
)
def test_a_sweep_that_makes_no_sense_is_refused_before_anything_is_sent(argv, words):
    with pytest.raises(InvalidRequest, match=words):
        submit_bodies(build_parser().parse_args(["submit", "/nb/train.ipynb", *argv]))


def test_unknown_arguments_are_refused_except_for_the_launchers(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["jobs", "--port", "9999"])
    assert exit.value.code == 2
    assert "unrecognized arguments: --port 9999" in capsys.readouterr().err


def test_launchers_pass_their_arguments_through_last():
    lab = launcher_argv("lab", ["--port", "9999"], as_root=True)
    assert lab[1:] == ["-m", "jupyterlab", "--allow-root", "--port", "9999"]
    serve = launcher_argv("serve", ["--port", "9999", "--E31.gpus=0,1"], as_root=False)
    assert serve[1:3] == ["-m", "e31_jupyter.server"]
    assert "'e31_jupyter': True" in serve[3] and serve[3].startswith("--ServerApp.jpserver_extensions=")
    assert "--ServerApp.open_browser=False" in serve and "--allow-root" not in serve
    assert serve[-3:] == ["--port", "9999", "--E31.gpus=0,1"]


@pytest.mark.parametrize(
    "seconds, text",
    [(0, "0s"), (45, "45s"), (60, "1m"), (61, "1m1s"), (5400, "1h30m"), (86400 * 2 + 3 * 3600 + 5, "2d3h")],
)
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


@pytest.mark.parametrize(
    "hours, text",
    [
        (0, "0"),
        (0.0004, "<0.001"),
        (0.0014, "0.001"),
        (0.042, "0.04"),
        (1.5, "1.50"),
        (37.54, "37.5"),
        (1204.4, "1,204"),
    ],
)
def test_format_gpu_hours_tells_a_short_job_from_nothing(hours, text):
    assert format_gpu_hours(hours) == text


def test_format_moment_shows_a_time_in_this_machines_zone_to_the_second(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        assert format_moment("2026-12-01T15:57:28.351+00:00") == "2026-12-01 21:27:28 IST"
        assert format_moment("2026-12-01T15:57:28.351+00:00", seconds=False) == "2026-12-01 21:27 IST"
        assert format_moment("2026-12-01T15:57:28.351+00:00", utc=True) == "2026-12-01 15:57:28 UTC"  # histories
        assert format_moment(None) is None
    finally:
        monkeypatch.undo()
        time.tzset()


def test_format_until_counts_down_to_a_time_and_then_says_now():
    now = datetime(2024, 1, 1, 10, 0, tzinfo=timezone.utc)
    assert format_until("2024-01-01T12:30:00+00:00", now) == "in 2h30m"
    assert format_until("2024-01-01T10:00:20+00:00", now) == "in under a minute"
    assert format_until("2024-01-01T09:00:00+00:00", now) == "now"
    assert format_until(None, now) is None


def test_format_table_aligns_columns_and_shows_none_as_dash():
    assert format_table(["ID", "STATE"], [["a1", "queued"], ["b", None]]) == "ID  STATE\na1  queued\nb   -"


def job(**fields):
    base = {
        "id": "j1",
        "name": "train",
        "state": "queued",
        "reason": None,
        "queue_position": 2,
        "request": {"gpus": 1},
        "gpus": [],
        "meter": {"gpu_hours": 0.5},
        "progress": {},
        "submitted_at": "2024-01-01T10:00:00+00:00",
    }
    return base | fields


def test_describe_says_where_the_job_is():
    assert describe(job()) == "queued (position 2)"
    soon = (datetime.now(timezone.utc) + timedelta(hours=1, minutes=30, seconds=10)).isoformat()
    assert describe(job(expected_start=soon)) == "queued (position 2, expected to start in 1h30m)"
    later = (datetime.now(timezone.utc) + timedelta(hours=2, seconds=10)).isoformat()
    assert describe(job(expected_start=soon, expected_end=later)) == (
        "queued (position 2, expected to start in 1h30m, to end in 2h)"
    )
    assert (
        describe(job(expected_to_expire=True))
        == "queued (position 2, expected to expire: its deadline is out of reach)"
    )
    held = job(expected_start=soon, held_back="the last 4 GPUs are kept for short jobs")
    assert describe(held) == (
        "queued (position 2, expected to start in 1h30m, held back though GPUs are free: the last 4 GPUs are kept for short jobs)"
    )
    assert (
        describe(job(held_back="long jobs hold their share"))
        == "queued (position 2, held back though GPUs are free: long jobs hold their share)"
    )
    after = job(queue_position=None, waiting_for=["240101-b90c4400"])
    assert describe(after) == "queued (waiting for 240101-b90c4400 to succeed)"
    assert describe(after | {"expected_start": soon}) == (
        "queued (waiting for 240101-b90c4400 to succeed, expected to start in 1h30m)"
    )
    assert describe(job(state="running", gpus=["0", "1"], progress={"cells_done": 3, "cells_total": 10})) == (
        "running on GPU 0,1 (3/10 cells)"
    )
    assert describe(job(state="running", gpus=["0"], expected_end=later)) == "running on GPU 0 (expected to end in 2h)"
    assert describe(job(state="failed", reason="exit status 1")) == "failed: exit status 1"
    assert describe(job(state="succeeded", reason="exit status 0")) == "succeeded"


def test_format_jobs_table():
    now = datetime(2024, 1, 1, 12, 30, tzinfo=timezone.utc)
    name = "train[" + "x" * 30 + ",seed=7]"  # a sweep's: what tells it apart is at the end
    done = job(id="j0", name=name, state="succeeded", queue_position=None, meter={"gpu_hours": 1.234})
    hopeless = job(id="j2", queue_position=3, expected_to_expire=True)
    jobs = [job(expected_start="2024-01-01T14:00:20Z"), hopeless, done]
    assert format_jobs(jobs, now).splitlines() == [
        "ID  NAME                              STATE      POS  STARTS    GPUS  GPU-H  AGE",
        "j1  train                             queued     2    in 1h30m  1     0.50   2h30m",
        "j2  train                             queued     3    expires   1     0.50   2h30m",
        "j0  train[" + "x" * 9 + "…" + "x" * 8 + ",seed=7]  succeeded  -    -         1     1.23   2h30m",
    ]
    waiting = job(id="j3", queue_position=None, waiting_for=["240101-b90c4400", "240101-0a1b2c3d"])
    assert "  queued  -    after b90c4400 +1  " in format_jobs([waiting], now)
    forecast = waiting | {"waiting_for": ["240101-b90c4400"], "expected_start": "2024-01-01T14:00:20Z"}
    assert "  queued  -    in 1h30m, after b90c4400  " in format_jobs([forecast], now)
    held = job(id="j4", expected_start="2024-01-01T14:00:20Z", held_back="the last 4 GPUs are kept for short jobs")
    assert format_jobs([held, hopeless], now).splitlines()[3:] == [
        "", "Held back though GPUs are free:", "  j4  the last 4 GPUs are kept for short jobs",
    ]  # fmt: skip


@pytest.mark.parametrize("path", ["../x", "a/../../b", "a/..", "/etc/passwd", "", ".", "C:\\x", "..\\x"])
def test_collect_refuses_unsafe_paths(tmp_path, path):
    with pytest.raises(InvalidRequest):
        safe_destination(tmp_path, path)


def test_collect_keeps_relative_paths(tmp_path):
    assert safe_destination(tmp_path, "plots/loss.png") == tmp_path / "plots" / "loss.png"


def test_collect_refuses_to_follow_a_symlink_out_of_the_folder(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link").symlink_to(tmp_path)
    with pytest.raises(InvalidRequest):
        safe_destination(tmp_path / "out", "link/x.txt")


def test_a_sweep_points_name_follows_its_parameters_when_run_again():
    from e31_jupyter.core.sweep import renamed

    assert renamed("train[lr=0.1,epochs=5]", {"lr": 0.1, "epochs": 3, "other": 1}) == "train[lr=0.1,epochs=3]"
    for name in ("train", "train[lr]", "train[batch=2]", "a[b]c"):  # not a point of these parameters
        assert renamed(name, {"lr": 0.1}) == name


@pytest.mark.parametrize(
    "devices, text",
    [
        (["1"], "GPU 1"),
        (["0", "1"], "GPUs 0, 1"),
        (["GPU-aef69e32-bf27"], "GPU-aef69e32-bf27"),
        (["MIG-GPU-0a1b/1/0", "3"], "MIG-GPU-0a1b/1/0, 3"),
    ],
)
def test_gpus_are_named_once_whether_by_index_or_by_id(devices, text):
    assert name_gpus(devices) == text
