"""The nouns: a job's spec (work, data, request, output) and the validation of a request (its
states are in ``states.py``).

Everything here is pure: parsing and checking, no I/O. Times are POSIX seconds (floats).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.core.text import format_seconds

# The cells of a job notebook made from a %%e31 cell, by tag: the inputs restored, the cell as
# written, its results handed back (the worker looks for the last).
SETUP_TAG, CELL_TAG, RESULTS_TAG = "e31-setup", "e31-cell", "e31-results"
REPORT_FORMATS = ("html",)
NO_REPORT = "none"  # reports: ["none"] asks for no report
PAGE_SIZE = 200  # jobs a list answers with at once, unless asked for another number
MAX_PAGE_SIZE = 1000
MAX_IDS = 500  # jobs asked for by id at once (tornado refuses a query of over 1000 fields)

MAX_DURATION_S = 366 * 86400.0
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")


def parse_duration(value, field_name: str) -> float:
    """Seconds from ``90m``, ``6h``, ``1d``, ``1h30m``, ``45s`` or a plain number of seconds."""
    if isinstance(value, bool):
        raise _bad_duration(value, field_name)
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and value.strip():
        text = value.strip().lower().replace(" ", "")
        if re.fullmatch(r"\d+(\.\d+)?", text):
            seconds = float(text)
        elif re.fullmatch(r"(?:\d+(?:\.\d+)?[smhdw])+", text):
            seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(text))
        else:
            raise _bad_duration(value, field_name)
    else:
        raise _bad_duration(value, field_name)
    if not 0 < seconds <= MAX_DURATION_S:  # also refuses NaN and infinity
        raise InvalidRequest(f"{field_name} must be longer than zero and at most a year, got {value!r}.")
    return seconds


def _bad_duration(value, field_name: str) -> InvalidRequest:
    return InvalidRequest(
        f"{field_name}: cannot read {value!r} as a duration. Use a number with a unit, "
        "such as 45s, 90m, 6h, 1d or 1h30m (or a number of seconds)."
    )


_CLOCK = re.compile(r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2})(?::(?P<second>\d{2}))?)?\s*(?P<half>am|pm)?")
_DAYS = {"today": 0, "tomorrow": 1}


def parse_deadline(value: str, now: float) -> float:
    """The deadline as POSIX seconds: ISO 8601, ``+6h`` (relative), a clock time ``08:00`` or
    ``8am`` meaning the next such time in the local time zone, or ``today 18:00`` /
    ``tomorrow 8am``."""
    if not isinstance(value, str) or not value.strip():
        raise _bad_deadline(value)
    text = value.strip()
    if text.startswith("+"):
        return now + parse_duration(text[1:], "deadline")
    day, _, rest = text.lower().partition(" ")
    if day in _DAYS:
        clock = _clock(rest.strip(), value)
        assert clock is not None  # required: an error rather than None
        return _clock_time_on(_DAYS[day], clock, now)
    clock = _clock(text.lower(), value, required=False)
    if clock is not None:
        return _next_clock_time(clock, now)
    try:
        when = dt.datetime.fromisoformat(_zulu(text))
    except ValueError:
        raise _bad_deadline(value) from None
    if when.tzinfo is None:
        when = when.astimezone()  # a naive time is local time
    return when.timestamp()


def is_day_and_clock(day: str, clock: str) -> bool:
    """Whether two words say a day and a time of it, as ``tomorrow`` ``8am``: a command line
    typed without quotes splits ``--deadline tomorrow 8am`` in two."""
    return day.lower() in _DAYS and _CLOCK.fullmatch(clock.lower()) is not None


def _clock(text: str, value, required: bool = True) -> dt.time | None:
    """``08:00``, ``8:00:30``, ``8am``, ``8:30 pm`` as a time of day; None (or, when
    ``required``, an error) for anything else. A bare hour needs am or pm: ``8`` says too little."""
    match = _CLOCK.fullmatch(text)
    if match is None or (match["minute"] is None and match["half"] is None):
        if required:
            raise _bad_deadline(value)
        return None
    hour, minute, second = int(match["hour"]), int(match["minute"] or 0), int(match["second"] or 0)
    if match["half"]:
        if not 1 <= hour <= 12:
            raise _bad_deadline(value)
        hour = hour % 12 + (12 if match["half"] == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        raise _bad_deadline(value)
    return dt.time(hour, minute, second)


def _next_clock_time(clock: dt.time, now: float) -> float:
    when = _clock_time_on(0, clock, now)
    return when if when > now else _clock_time_on(1, clock, now)


def _clock_time_on(days_ahead: int, clock: dt.time, now: float) -> float:
    """POSIX seconds of ``clock``, local wall time, ``days_ahead`` days after today."""
    day = dt.datetime.fromtimestamp(now).date() + dt.timedelta(days=days_ahead)
    return dt.datetime.combine(day, clock).timestamp()  # naive: local time, DST included


def _bad_deadline(value) -> InvalidRequest:
    return InvalidRequest(
        f"deadline: cannot read {value!r}. Use an ISO 8601 time (2026-12-01T08:00), "
        "a time from now (+6h), a clock time (08:00 or 8am, meaning the next one, local time), "
        "or a day and a clock time (today 18:00, tomorrow 8am)."
    )


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="milliseconds")


def _zulu(text):
    """Python 3.10 reads no trailing Z; it means UTC."""
    return text[:-1] + "+00:00" if isinstance(text, str) and text.endswith(("Z", "z")) else text


def parse_iso(value: str, field_name: str) -> float:
    try:
        when = dt.datetime.fromisoformat(_zulu(value))
    except (TypeError, ValueError):
        raise InvalidRequest(f"{field_name}: cannot read {value!r} as an ISO 8601 time.") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return when.timestamp()


@dataclass
class Request:
    """What the job asks of the queue."""

    gpus: int = 0
    max_runtime_s: float = 86400.0
    expected_runtime_s: float | None = None
    deadline: float | None = None
    max_runtime_given: bool = False
    memory_bytes: int | None = None  # a container's memory limit (container backends only)
    cpus: float | None = None  # a container's CPU limit (container backends only)

    def runtime_estimate(self) -> float:
        """How long the job is expected to hold its GPUs, for deadline and backfill decisions.

        ``max_runtime`` is a limit, not an estimate: it stands in only when the user declared it.
        With neither declared, the estimate is zero and the job expires only when its deadline
        passes before it starts."""
        if self.expected_runtime_s is not None:
            return self.expected_runtime_s
        return self.max_runtime_s if self.max_runtime_given else 0.0


@dataclass
class JobSpec:
    """Everything a job declares at submit. Stored as ``spec.json`` in the job's directory."""

    name: str
    notebook_name: str
    kernel: str
    parameters: dict = field(default_factory=dict)
    data: list[str] = field(default_factory=list)
    request: Request = field(default_factory=Request)
    team: str = ""
    outputs: list[str] = field(default_factory=list)
    reports: list[str] = field(default_factory=lambda: list(REPORT_FORMATS))
    image: str = ""  # the container image (container backends only)
    max_output_bytes: int = 50 << 30  # collected files past this are left out, and listed
    after: list[str] = field(default_factory=list)  # jobs that must succeed before it starts (dependencies.py)
    checkpoint: bool = False  # save the kernel at cell ends, so that it can be resumed (checkpoint.py)
    checkpoint_share: float = 0.05  # the most of the run time since the last checkpoint one may cost
    on_timeout: str = "fail"  # ON_TIMEOUT: fail, or suspend (with its checkpoint) when max_runtime is up

    def to_dict(self) -> dict:
        return asdict(self)


_SUBMIT_FIELDS = {
    "path", "notebook", "notebook_name", "folder", "parameters", "data", "gpus", "max_runtime",
    "expected_runtime", "deadline", "name", "team", "outputs", "reports", "inputs", "fingerprint",
    "image", "memory", "cpus", "after", "kernel", "checkpoint", "on_timeout",
}  # fmt: skip
_CONTAINER_FIELDS = ("image", "memory", "cpus")


@dataclass
class ContainerLimits:
    """What a container backend allows: its images, and the most memory and CPUs a job may
    have (which is also what a job gets when it asks for no limit of its own)."""

    default_image: str = ""
    allowed_images: list[str] = field(default_factory=list)
    max_memory_bytes: int | None = None
    max_cpus: float | None = None

    @property
    def images(self) -> list[str]:
        return [i for i in dict.fromkeys([self.default_image, *self.allowed_images]) if i]


@dataclass
class Limits:
    """What the server allows; the validation needs it to say what is allowed."""

    inventory: list[str] | None  # None: a cluster scheduler (Slurm) decides what fits
    default_max_runtime_s: float
    kernels: list[str]
    container: ContainerLimits | None = None  # None: jobs run as processes, not in containers
    max_gpus_per_user: int | None = None  # the most GPUs one user's jobs may hold at once; None: no cap


def validate_request(body: dict, limits: Limits, now: float) -> tuple[Request, list[str]]:
    """The request part of a submit body, checked; returns it with warnings for the user."""
    unknown = sorted(set(body) - _SUBMIT_FIELDS)
    if unknown:
        raise InvalidRequest(f"Unknown field(s): {', '.join(unknown)}. Allowed: {', '.join(sorted(_SUBMIT_FIELDS))}.")
    gpus = _validate_gpus(body.get("gpus", 0), limits.inventory)
    if limits.max_gpus_per_user is not None and gpus > limits.max_gpus_per_user:
        raise InvalidRequest(
            f"gpus: asked for {gpus}, but one user's jobs may hold at most {limits.max_gpus_per_user} GPU(s) at once "
            f"on this queue (c.E31.max_gpus_per_user). Ask for at most {limits.max_gpus_per_user}."
        )
    resources = _validate_container_resources(body, limits.container)
    warnings: list[str] = []
    given = body.get("max_runtime") not in (None, "")
    max_runtime = parse_duration(body["max_runtime"], "max_runtime") if given else limits.default_max_runtime_s
    expected = None
    if body.get("expected_runtime") not in (None, ""):
        expected = parse_duration(body["expected_runtime"], "expected_runtime")
        if expected > max_runtime:
            raise InvalidRequest(
                f"expected_runtime ({format_seconds(expected)}) is longer than max_runtime "
                f"({format_seconds(max_runtime)}); the job would be stopped before it is expected "
                "to finish. Raise max_runtime or lower expected_runtime."
            )
    deadline = None
    if body.get("deadline") not in (None, ""):
        deadline = parse_deadline(body["deadline"], now)
        if deadline <= now:
            raise InvalidRequest(
                f"deadline: {body['deadline']!r} ({iso(deadline)}) is in the past. "
                "Give a future time, e.g. +6h or 08:00."
            )
        request = Request(gpus, max_runtime, expected, deadline, given, **resources)
        slack = deadline - now
        if expected is not None and expected > slack:
            warnings.append(
                f"expected_runtime ({format_seconds(expected)}) is longer than the time to the "
                f"deadline ({format_seconds(slack)}): the job cannot finish in time and will "
                "expire unless it starts at once."
            )
        if given and expected is None and max_runtime > slack:
            warnings.append(
                f"max_runtime ({format_seconds(max_runtime)}) is longer than the time to the "
                f"deadline ({format_seconds(slack)}). Without expected_runtime e31 assumes the job "
                "needs all of max_runtime, so it expires unless it can start right away. "
                "Give expected_runtime to say how long it usually takes."
            )
        return request, warnings
    return Request(gpus, max_runtime, expected, None, given, **resources), warnings


def whole_number(value, field_name: str) -> int:
    """A count of 0 or more, from a JSON number or a query-string text."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidRequest(f"{field_name} must be a whole number, got {value!r}.")
    try:
        number = int(value)
    except ValueError:
        raise InvalidRequest(f"{field_name} must be a whole number, got {value!r}.") from None
    if number < 0:
        raise InvalidRequest(f"{field_name} must be 0 or more, got {number}.")
    return number


def _validate_gpus(value, inventory: list[str] | None) -> int:
    """A GPU count this queue can grant; ``inventory`` None: a cluster scheduler decides."""
    if inventory is None:
        return whole_number(value, "gpus")
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise InvalidRequest(f"gpus must be 0 or more, got {value}. This queue has {_inventory_text(inventory)}.")
    gpus = whole_number(value, "gpus")
    if gpus > len(inventory):
        raise InvalidRequest(
            f"gpus: asked for {gpus}, but this queue has {_inventory_text(inventory)}. "
            f"Ask for at most {len(inventory)}"
            + (", or configure the inventory with c.E31.gpus." if not inventory else ".")
        )
    return gpus


def _inventory_text(inventory: list[str]) -> str:
    return f"{len(inventory)} GPU(s): {', '.join(inventory)}" if inventory else "no GPUs"


def validate_image(body: dict, limits: Limits) -> str:
    """The job's container image: the one asked for if it is allowed, else the default
    ("" when jobs do not run in containers)."""
    if limits.container is None:
        return ""
    allowed = limits.container.images
    image = validate_text(body, "image") or limits.container.default_image
    if not image:
        raise InvalidRequest(
            "image: this queue has no default image (c.E31.docker_image); name one"
            + (f". Allowed: {', '.join(allowed)}." if allowed else ".")
        )
    if image not in allowed:
        raise InvalidRequest(
            f"image: {image!r} is not allowed here. Allowed: {', '.join(allowed)}. "
            "An admin can add images with c.E31.docker_allowed_images."
        )
    return image


def _validate_container_resources(body: dict, container: ContainerLimits | None) -> dict:
    """A container's memory and CPU limits: asked for (at most the configured ones), else the
    configured ones. Refused when jobs do not run in containers: no limit would be enforced."""
    if container is None:
        given = [key for key in _CONTAINER_FIELDS if body.get(key) not in (None, "")]
        if given:
            raise InvalidRequest(
                f"{', '.join(given)}: this queue runs jobs as processes on its own machine, "
                "without an image or memory and CPU limits. Leave them out, or use a queue "
                "that runs jobs in containers (c.E31.backend = 'docker')."
            )
        return {}
    memory = container.max_memory_bytes
    if body.get("memory") not in (None, ""):
        memory = parse_memory(body["memory"], "memory")
        if container.max_memory_bytes is not None and memory > container.max_memory_bytes:
            raise InvalidRequest(
                f"memory: asked for {format_memory(memory)}, but jobs here may have at most "
                f"{format_memory(container.max_memory_bytes)}."
            )
    cpus = container.max_cpus
    if body.get("cpus") not in (None, ""):
        cpus = parse_cpus(body["cpus"], "cpus")
        if container.max_cpus is not None and cpus > container.max_cpus:
            raise InvalidRequest(f"cpus: asked for {cpus:g}, but jobs here may have at most {container.max_cpus:g}.")
    return {"memory_bytes": memory, "cpus": cpus}


_MEMORY_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
MIN_MEMORY_BYTES = 6 << 20  # Docker's smallest memory limit


def parse_memory(value, field_name: str) -> int:
    """Bytes from ``512m``, ``8g``, ``1.5GiB`` (binary units, as Docker reads them) or a number."""
    match = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number, unit = float(value), ""
    elif isinstance(value, str):
        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", value.strip().lower())
        if match is None:
            raise _bad_memory(value, field_name)
        number, unit = float(match[1]), match[2]
    else:
        raise _bad_memory(value, field_name)
    size = int(number * _MEMORY_UNITS[unit])
    if not MIN_MEMORY_BYTES <= size <= 1 << 50:
        raise InvalidRequest(f"{field_name} must be between 6m and 1024t, got {value!r}.")
    return size


def _bad_memory(value, field_name: str) -> InvalidRequest:
    return InvalidRequest(
        f"{field_name}: cannot read {value!r} as an amount of memory. "
        "Use a number with a unit, such as 512m, 8g or 1.5g."
    )


def format_memory(size: int) -> str:
    """``8g``, ``512m``, ``1.5g``: as parse_memory reads it."""
    for unit in ("t", "g", "m", "k"):
        if size >= _MEMORY_UNITS[unit]:
            return f"{size / _MEMORY_UNITS[unit]:.3g}{unit}"
    return str(size)


def parse_cpus(value, field_name: str) -> float:
    """A number of CPUs, fractions allowed (0.5 is half a CPU's time)."""
    try:
        cpus = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        cpus = math.nan
    if not 0.01 <= cpus <= 4096:  # also refuses NaN and infinity
        raise InvalidRequest(f"{field_name} must be a number of CPUs from 0.01 on, such as 4 or 0.5; got {value!r}.")
    return cpus


def validate_outputs(body: dict) -> tuple[list[str], list[str]]:
    outputs = string_list(body.get("outputs"), "outputs")
    for pattern in outputs:
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise InvalidRequest(
                f"outputs: {pattern!r} points outside the job's working directory; "
                "use a glob relative to it, such as results/*.csv."
            )
    return outputs, validate_reports(body)


def validate_reports(body: dict) -> list[str]:
    """The report formats asked for: the default (html), or none for ``["none"]`` or ``[]``."""
    reports = string_list(body.get("reports", list(REPORT_FORMATS)), "reports")
    if NO_REPORT in reports:
        if len(reports) > 1:
            raise InvalidRequest(
                f"reports: {NO_REPORT!r} asks for no report, so it cannot go with {', '.join(reports)}; give one or the other."
            )
        return []
    for fmt in reports:
        if fmt not in REPORT_FORMATS:
            raise InvalidRequest(
                f"reports: unknown format {fmt!r}. Allowed: {', '.join(REPORT_FORMATS)}, or {NO_REPORT!r} "
                "for no report (the executed notebook is always kept)."
            )
    return reports


def string_list(value, field_name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidRequest(f"{field_name} must be a list of non-empty strings, got {value!r}.")
    return list(value)


def server_path(text: str, root_dir: Path, field_name: str) -> Path:
    """A path the client named: ``~`` expanded, a relative one taken from the server's root dir."""
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # ~someone who has no home here
        raise InvalidRequest(f"{field_name}: cannot find the home folder in {text!r}; give the full path.") from None
    return path if path.is_absolute() else root_dir / path


ON_TIMEOUT_SUSPEND = "suspend"
ON_TIMEOUT = ("fail", ON_TIMEOUT_SUSPEND)


def validate_on_timeout(body: dict, checkpoint: bool) -> str:
    """What a job does when its max_runtime is up: fail, or suspend (which needs checkpoints)."""
    value = body.get("on_timeout") or "fail"
    if value not in ON_TIMEOUT:
        raise InvalidRequest(f"on_timeout: {value!r} is not one of {', '.join(ON_TIMEOUT)}.")
    if value == ON_TIMEOUT_SUSPEND and not checkpoint:
        raise InvalidRequest(
            "on_timeout: suspend keeps the work through a checkpoint, and this job takes none; add --checkpoint."
        )
    return value


def validate_flag(body: dict, key: str, default: bool) -> bool:
    """A yes-or-no field: true or false, or ``default`` when not given (or null)."""
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidRequest(f"{key} must be true or false; got {value!r}.")
    return value


def validate_text(body: dict, key: str, default: str = "") -> str:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str) or len(value) > 200 or not value.isprintable():  # no escape codes for terminals
        raise InvalidRequest(
            f"{key} must be a single line of text (at most 200 characters, no tabs or control characters)."
        )
    return value.strip()


def validate_parameters(value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and k.isidentifier() for k in value):
        raise InvalidRequest('parameters must be an object whose keys are Python names, e.g. {"epochs": 3}.')
    return value
