"""The nouns, pure: durations, deadlines, and the checks on a submit request."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.core.job import (
    Limits,
    Request,
    parse_deadline,
    parse_duration,
    validate_outputs,
    validate_request,
    validate_text,
)

NOW = dt.datetime(2030, 1, 15, 12, 0, tzinfo=dt.timezone.utc).timestamp()
LIMITS = Limits(inventory=["0", "1"], default_max_runtime_s=86400.0, kernels=["python3"])
# Central European time with its DST rules, as a POSIX TZ string (needs no tz database).
BERLIN = "CET-1CEST,M3.5.0,M10.5.0/3"


@pytest.fixture
def berlin(monkeypatch):
    """Run the test in Central European local time."""
    monkeypatch.setenv("TZ", BERLIN)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def local(*fields) -> float:
    """POSIX seconds of a wall-clock time in the current local time zone."""
    return dt.datetime(*fields).timestamp()


def refused(call, *args, **kwargs) -> str:
    with pytest.raises(InvalidRequest) as error:
        call(*args, **kwargs)
    assert error.value.status == 400
    return error.value.message


# -- durations --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, seconds",
    [
        ("90m", 5400), ("6h", 21600), ("1d", 86400), ("1h30m", 5400), ("45s", 45), ("1w", 604800),
        ("3600", 3600), (3600, 3600), (2.5, 2.5), ("1.5h", 5400), (" 1h 30m ", 5400), ("6H", 21600),
    ],
)  # fmt: skip
def test_parse_duration_reads_units_and_plain_seconds(value, seconds):
    assert parse_duration(value, "max_runtime") == seconds


@pytest.mark.parametrize("value", ["", "  ", "soon", "6x", "h", "1h30", "-5m", "1e3", "1,5h", None, True, [], {}])
def test_parse_duration_refuses_what_it_cannot_read_naming_the_field_and_showing_examples(value):
    message = refused(parse_duration, value, "expected_runtime")
    assert message.startswith("expected_runtime: ")
    assert repr(value) in message
    assert all(example in message for example in ("45s", "90m", "6h", "1h30m"))


@pytest.mark.parametrize("value", [0, 0.0, "0", "0s", "0h0m", -5, -0.5])
def test_parse_duration_refuses_zero_and_negative(value):
    message = refused(parse_duration, value, "max_runtime")
    assert "max_runtime" in message and "longer than zero" in message


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), "9" * 400, "9" * 400 + "h"], ids=["nan", "inf", "huge", "huge-h"]
)
def test_parse_duration_refuses_nan_and_infinite(value):
    refused(parse_duration, value, "max_runtime")


# -- deadlines --------------------------------------------------------------------------------


def test_relative_deadline_counts_from_now():
    assert parse_deadline("+6h", NOW) == NOW + 6 * 3600
    assert parse_deadline(" +1h30m ", NOW) == NOW + 5400


def test_relative_deadline_of_zero_is_refused():
    assert "deadline" in refused(parse_deadline, "+0s", NOW)


def test_iso_deadline_with_a_zone():
    expected = dt.datetime(2030, 6, 1, 6, 0, tzinfo=dt.timezone.utc).timestamp()
    assert parse_deadline("2030-06-01T08:00:00+02:00", NOW) == expected
    assert parse_deadline("2030-06-01T06:00+00:00", NOW) == expected


def test_iso_deadline_without_a_zone_is_local_time(berlin):
    assert parse_deadline("2030-06-01T08:00", NOW) == local(2030, 6, 1, 8, 0)
    assert local(2030, 6, 1, 8, 0) == dt.datetime(2030, 6, 1, 6, 0, tzinfo=dt.timezone.utc).timestamp()


def test_clock_deadline_just_before_is_today(berlin):
    assert parse_deadline("08:00", local(2030, 1, 15, 7, 59, 59)) == local(2030, 1, 15, 8, 0)


def test_clock_deadline_just_after_or_at_is_tomorrow(berlin):
    assert parse_deadline("08:00", local(2030, 1, 15, 8, 0, 1)) == local(2030, 1, 16, 8, 0)
    assert parse_deadline("08:00", local(2030, 1, 15, 8, 0, 0)) == local(2030, 1, 16, 8, 0)


def test_clock_deadline_accepts_one_digit_hours_and_seconds(berlin):
    now = local(2030, 1, 15, 6, 0)
    assert parse_deadline("8:00", now) == local(2030, 1, 15, 8, 0)
    assert parse_deadline("08:00:30", now) == local(2030, 1, 15, 8, 0, 30)


def test_clock_deadline_is_local_wall_time_across_a_dst_change(berlin):
    # the night the clocks go forward (02:00 -> 03:00): 01:00 to 08:00 is six hours
    assert parse_deadline("08:00", local(2030, 3, 31, 1, 0)) - local(2030, 3, 31, 1, 0) == 6 * 3600
    # the night they go back (03:00 -> 02:00): eight hours
    assert parse_deadline("08:00", local(2030, 10, 27, 1, 0)) - local(2030, 10, 27, 1, 0) == 8 * 3600
    # and tomorrow's 08:00, seen from the day before the change
    assert parse_deadline("08:00", local(2030, 3, 30, 9, 0)) == local(2030, 3, 31, 8, 0)


@pytest.mark.parametrize(
    "value, hour, minute",
    [("8am", 8, 0), ("8 AM", 8, 0), ("8:30pm", 20, 30), ("8:30 pm", 20, 30), ("12am", 0, 0), ("12pm", 12, 0),
     ("12:15am", 0, 15), ("11:59 PM", 23, 59)],
)  # fmt: skip
def test_clock_deadline_reads_am_and_pm(berlin, value, hour, minute):
    now = local(2030, 1, 14, 23, 59)  # a minute before midnight: the next of each is on the 15th
    assert parse_deadline(value, now) == local(2030, 1, 15, hour, minute)


def test_a_passed_am_pm_time_is_tomorrows(berlin):
    assert parse_deadline("8am", local(2030, 1, 15, 9, 0)) == local(2030, 1, 16, 8, 0)


def test_tomorrow_is_the_next_day_even_when_the_time_is_still_ahead_today(berlin):
    now = local(2030, 1, 15, 6, 0)
    assert parse_deadline("08:00", now) == local(2030, 1, 15, 8, 0)
    assert parse_deadline("tomorrow 08:00", now) == local(2030, 1, 16, 8, 0)
    assert parse_deadline(" Tomorrow 8am ", now) == local(2030, 1, 16, 8, 0)
    # across the end of a month and of a year
    assert parse_deadline("tomorrow 8am", local(2030, 12, 31, 23, 0)) == local(2031, 1, 1, 8, 0)


def test_today_is_today_even_when_the_time_has_passed(berlin):
    now = local(2030, 1, 15, 12, 0)
    assert parse_deadline("today 18:00", now) == local(2030, 1, 15, 18, 0)
    assert parse_deadline("today 8am", now) == local(2030, 1, 15, 8, 0)  # the request refuses it as past


def test_a_deadline_today_that_has_passed_is_refused_as_in_the_past(berlin):
    message = refused(validate_request, {"deadline": "today 8am"}, LIMITS, local(2030, 1, 15, 12, 0))
    assert "'today 8am'" in message and "in the past" in message


def test_tomorrow_follows_local_wall_time_across_a_dst_change(berlin):
    # seen from 19:00 the evening before the clocks go forward, tomorrow 08:00 is 12 hours away, not 13
    assert parse_deadline("tomorrow 08:00", local(2030, 3, 30, 19, 0)) - local(2030, 3, 30, 19, 0) == 12 * 3600


@pytest.mark.parametrize(
    "value",
    ["25:00", "24:00", "08:60", "08:00:61", "tomorrow", "today", "8", "13pm", "0am", "12:60pm", "8 a.m.",
     "tomorrow 25:00", "tomorrow +6h", "yesterday 8am", "tomorrowmorning", "+soon", "", None, 8],
)  # fmt: skip
def test_bad_deadlines_are_refused_with_examples(value):
    message = refused(parse_deadline, value, NOW)
    assert "deadline" in message
    if value != "+soon":  # that one is a bad duration, and shows duration examples
        assert all(example in message for example in ("+6h", "08:00", "8am", "tomorrow 8am", "ISO 8601"))


# -- the request ------------------------------------------------------------------------------


def test_an_empty_request_gets_the_defaults():
    request, warnings = validate_request({}, LIMITS, NOW)
    assert request == Request(gpus=0, max_runtime_s=86400.0, expected_runtime_s=None, deadline=None)
    assert request.max_runtime_given is False and warnings == []


def test_a_full_request_is_read():
    body = {"gpus": "2", "max_runtime": "6h", "expected_runtime": "90m", "deadline": "+8h"}
    request, warnings = validate_request(body, LIMITS, NOW)
    assert request == Request(2, 21600.0, 5400.0, NOW + 8 * 3600, True)
    assert warnings == []


@pytest.mark.parametrize("gpus", [-1, "-1"])
def test_negative_gpus_are_refused(gpus):
    message = refused(validate_request, {"gpus": gpus}, LIMITS, NOW)
    assert "gpus" in message and "0 or more" in message


def test_more_gpus_than_the_inventory_are_refused_naming_it():
    message = refused(validate_request, {"gpus": 3}, LIMITS, NOW)
    assert "2 GPU(s): 0, 1" in message and "at most 2" in message


def test_gpus_on_a_queue_without_gpus_points_to_the_configuration():
    message = refused(validate_request, {"gpus": 1}, Limits([], 86400.0, ["python3"]), NOW)
    assert "no GPUs" in message and "c.E31.gpus" in message


@pytest.mark.parametrize("gpus", [1.5, "1.5", "one", True, None, [1]])
def test_gpus_must_be_a_whole_number(gpus):
    assert "whole number" in refused(validate_request, {"gpus": gpus}, LIMITS, NOW)


@pytest.mark.parametrize("deadline", ["2000-01-01T00:00+00:00", dt.datetime.fromtimestamp(NOW - 1).isoformat()])
def test_a_deadline_in_the_past_is_refused(deadline):
    message = refused(validate_request, {"deadline": deadline}, LIMITS, NOW)
    assert "deadline" in message and "in the past" in message


def test_expected_runtime_longer_than_max_runtime_is_refused():
    message = refused(validate_request, {"max_runtime": "1h", "expected_runtime": "2h"}, LIMITS, NOW)
    assert "expected_runtime (2h)" in message and "max_runtime (1h)" in message


def test_expected_runtime_longer_than_the_default_max_runtime_is_refused():
    assert "max_runtime" in refused(validate_request, {"expected_runtime": "2d"}, LIMITS, NOW)


def test_a_deadline_sooner_than_an_explicit_max_runtime_is_accepted_with_a_warning():
    request, warnings = validate_request({"max_runtime": "6h", "deadline": "+1h"}, LIMITS, NOW)
    assert request.deadline == NOW + 3600 and request.max_runtime_s == 21600
    assert len(warnings) == 1
    assert "max_runtime (6h)" in warnings[0] and "deadline (1h)" in warnings[0]
    assert "expected_runtime" in warnings[0]


@pytest.mark.parametrize(
    "body",
    [
        {"deadline": "+1h"},  # the default max_runtime is no claim about this job
        {"max_runtime": "6h", "expected_runtime": "30m", "deadline": "+1h"},
        {"max_runtime": "30m", "deadline": "+1h"},
    ],
)
def test_no_warning_when_the_deadline_leaves_room(body):
    assert validate_request(body, LIMITS, NOW)[1] == []


def test_an_unknown_field_is_refused_listing_the_allowed_ones():
    message = refused(validate_request, {"gpu": 1}, LIMITS, NOW)
    assert "Unknown field(s): gpu." in message and "gpus" in message and "max_runtime" in message


def test_an_empty_max_runtime_means_the_default():
    request, _ = validate_request({"max_runtime": ""}, LIMITS, NOW)
    assert request.max_runtime_s == 86400.0 and not request.max_runtime_given


# -- outputs ----------------------------------------------------------------------------------


def test_outputs_and_reports_are_read():
    assert validate_outputs({}) == ([], ["html"])
    assert validate_outputs({"outputs": "results/*.csv"}) == (["results/*.csv"], ["html"])
    assert validate_outputs({"outputs": ["a/**/*.pt", "b.txt"], "reports": []}) == (["a/**/*.pt", "b.txt"], [])


@pytest.mark.parametrize("glob", ["/etc/*", "../x", "a/../../b", "results/..", "a//../../b"])
def test_output_globs_leaving_the_job_directory_are_refused(glob):
    message = refused(validate_outputs, {"outputs": ["ok.txt", glob]})
    assert message.startswith("outputs: ") and repr(glob) in message


@pytest.mark.parametrize("outputs", [[""], [3], {"a": 1}])
def test_outputs_must_be_non_empty_strings(outputs):
    assert "outputs" in refused(validate_outputs, {"outputs": outputs})


def test_an_unknown_report_format_is_refused():
    message = refused(validate_outputs, {"reports": ["html", "pdf"]})
    assert "'pdf'" in message and "html" in message


# -- runtime estimate -------------------------------------------------------------------------


def test_runtime_estimate_prefers_expected_runtime():
    assert Request(1, 3600.0, 600.0, None, True).runtime_estimate() == 600.0


def test_runtime_estimate_falls_back_to_a_declared_max_runtime():
    assert Request(1, 3600.0, None, None, True).runtime_estimate() == 3600.0


def test_runtime_estimate_is_zero_when_nothing_was_declared():
    assert Request(1, 86400.0, None, None, False).runtime_estimate() == 0.0


def test_the_estimate_of_a_validated_request_follows_what_was_given():
    assert validate_request({}, LIMITS, NOW)[0].runtime_estimate() == 0.0
    assert validate_request({"max_runtime": "2h"}, LIMITS, NOW)[0].runtime_estimate() == 7200.0
    assert validate_request({"max_runtime": "2h", "expected_runtime": 60}, LIMITS, NOW)[0].runtime_estimate() == 60.0


@pytest.mark.parametrize("text", ["two\nlines", "a\ttab", "\x1b[2Jclears the terminal", "nul\x00", "x" * 201])
def test_a_name_or_team_is_one_line_of_plain_text(text):
    with pytest.raises(InvalidRequest, match="team must be a single line of text .*no tabs or control characters"):
        validate_text({"team": text}, "team")


def test_a_name_may_hold_any_printable_text():
    assert validate_text({"name": "  café: loss ≤ 0.1 ✓  "}, "name") == "café: loss ≤ 0.1 ✓"
