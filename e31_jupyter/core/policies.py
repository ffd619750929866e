"""The scheduling policies by name (``c.E31.policy``, the simulator's ``--policies``):

- ``fifo``: first come, first served, strictly: the first job that does not fit blocks the rest.
- ``sjf``: smallest declared GPU-time first; every job that fits starts (no reservation).
- ``edf``: earliest deadline first with EASY backfill; a job that cannot start and can no longer
  meet its deadline by its estimate expires.
- ``backfill``: Slurm's way: multifactor priority (age, fair-share with a decaying usage
  half-life, a small-job factor), EASY backfill on declared max run time, and a pending job that
  can no longer end within its time limit before its deadline is dropped (``--deadline``).
- ``e31``, the default: earliest deadline first (by the hour; within it, fewest expected GPU-hours
  first) with EASY backfill; run times learned from finished jobs (their declared run times and
  deadline windows; for a job that declared none, what such jobs took) decide when a job
  expires (more likely than not to miss); a lane of GPUs that long jobs which can wait leave
  free, whatever their size, as many as short jobs that could not wait needed in this hour or
  the last (none where deadlines leave hours); at most a share of the GPUs, and of the machines
  (long jobs go beside each other), for jobs that run for days, whatever their size, while they
  can wait and such short jobs came in the last day; a
  fair-share nudge. See ``e31_priority``, ``e31_lane``, ``LongJobs`` and ``e31_walk``.
- ``e31-preempt``: ``e31`` in deadline order (among jobs due at the same minute, fewest expected
  GPU-hours first, then fair share), and a job that will miss its deadline unless
  it is given room may have running jobs that keep checkpoints suspended for it, when they can
  afford it and it is worth what they lose. See ``e31_preempt_priority`` and ``e31_preempt_walk``
  (``e31_preempt.py``).
"""

from __future__ import annotations

from e31_jupyter.core.baselines import (
    SLURM_CALC_PERIOD_S,
    edf_priority,
    edf_walk,
    fifo_priority,
    fifo_walk,
    sjf_priority,
    sjf_walk,
    slurm_priority,
    slurm_walk,
)
from e31_jupyter.core.e31_policy import e31_priority, e31_walk
from e31_jupyter.core.e31_preempt import e31_preempt_priority, e31_preempt_walk
from e31_jupyter.core.policy import Policy

POLICIES: dict[str, Policy] = {
    "fifo": Policy("fifo", fifo_priority, fifo_walk),
    "backfill": Policy("backfill", slurm_priority, slurm_walk, refresh_s=SLURM_CALC_PERIOD_S),
    "edf": Policy("edf", edf_priority, edf_walk),
    "sjf": Policy("sjf", sjf_priority, sjf_walk),
    "e31": Policy("e31", e31_priority, e31_walk, refresh_s=300.0),
    "e31-preempt": Policy("e31-preempt", e31_preempt_priority, e31_preempt_walk, refresh_s=300.0, preempts=True),
}
DEFAULT_POLICY = "e31"
PREEMPTING = "e31-preempt"  # the default policy's form that may suspend jobs (c.E31.preempt)
