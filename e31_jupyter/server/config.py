"""The ``E31`` configuration section: ``c.E31.gpus = ["0", "1"]`` or ``--E31.gpus=0,1``."""

from __future__ import annotations

import os

from jupyter_core.paths import jupyter_data_dir
from traitlets import Enum, Float, List, Unicode, default, validate
from traitlets.config import Configurable

from ..errors import InvalidRequest
from ..job import parse_duration


class E31(Configurable):
    gpus = List(
        Unicode(),
        default_value=None,
        allow_none=True,
        help="GPUs the queue may hand out (device indices or UUIDs). Default: every GPU NVML "
        "reports, none without an NVIDIA driver. A subset gives the queue part of a machine.",
    ).tag(config=True)

    data_dir = Unicode(
        help="Where the queue keeps its SQLite store and job directories. Servers that share it "
        "share one queue. Default: e31/ under the Jupyter data directory."
    ).tag(config=True)

    backend = Enum(["local"], default_value="local", help="Where jobs run.").tag(config=True)

    policy = Enum(["edf"], default_value="edf", help="The scheduling policy.").tag(config=True)

    default_max_runtime = Unicode(
        "24h", help="The run time limit of a job that declares none (e.g. 90m, 6h, 1d)."
    ).tag(config=True)

    gpu_hour_rate = Float(0.0, help="What one GPU-hour costs, in `currency`.").tag(config=True)

    currency = Unicode("USD", help="The currency of gpu_hour_rate.").tag(config=True)

    admin_users = List(
        Unicode(), help="Users who see and cancel every job, not only their own."
    ).tag(config=True)

    stop_grace = Float(
        5.0, help="Seconds between SIGTERM and SIGKILL when a job is cancelled or times out."
    ).tag(config=True)

    @default("data_dir")
    def _default_data_dir(self):
        return os.path.join(jupyter_data_dir(), "e31")

    @validate("gpus")
    def _split_device_lists(self, proposal):
        # --E31.gpus=0,1 on the command line arrives as one item "0,1"
        if proposal["value"] is None:
            return None
        return [d.strip() for item in proposal["value"] for d in str(item).split(",") if d.strip()]

    @validate("default_max_runtime")
    def _check_duration(self, proposal):
        try:
            parse_duration(proposal["value"], "c.E31.default_max_runtime")
        except InvalidRequest as error:
            raise ValueError(str(error)) from None
        return proposal["value"]

    @validate("gpu_hour_rate")
    def _check_rate(self, proposal):
        if proposal["value"] < 0:
            raise ValueError("c.E31.gpu_hour_rate must be 0 or more.")
        return proposal["value"]
