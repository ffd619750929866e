"""Fair-share usage, pure: each team's GPU-seconds as the meter counts them, decaying with a
half-life as Slurm's does, for policies that weigh who has used how much lately."""

from __future__ import annotations

from collections import defaultdict

FAIR_SHARE_HALF_LIFE_S = 7 * 86400.0  # Slurm's PriorityDecayHalfLife default


def decayed(gpu_seconds: float, age_s: float) -> float:
    """Fair-share usage: GPU-seconds count half as much every FAIR_SHARE_HALF_LIFE_S."""
    return gpu_seconds * 0.5 ** (max(age_s, 0.0) / FAIR_SHARE_HALF_LIFE_S)


class Usage:
    """Per-team fair-share usage as the meter counts it: the GPU-seconds of holds that ended,
    ``decayed`` since they ended, plus those of running holds so far. Ended usage is kept scaled
    to a reference time ``t0`` (any moment within decades of the events), so it decays without
    touching every team at every event. The simulator reports starts and ends; the live queue
    reports ends (``ended``) and adds its running jobs itself."""

    def __init__(self, t0: float):
        self.t0 = t0
        self._ended: dict[str, float] = defaultdict(float)
        self._gpus: dict[str, float] = defaultdict(float)  # GPUs held now
        self._gpu_starts: dict[str, float] = defaultdict(float)  # sum of gpus x started_at

    def join(self, team: str) -> None:
        """A team counts toward the equal shares from its first job on."""
        self._ended[team] += 0.0

    def start(self, team: str, gpus: int, t: float) -> None:
        self._gpus[team] += gpus
        self._gpu_starts[team] += gpus * t

    def end(self, team: str, gpus: int, started_at: float, t: float) -> None:
        self._gpus[team] -= gpus
        self._gpu_starts[team] -= gpus * started_at
        self.ended(team, gpus * (t - started_at), t)

    def ended(self, team: str, gpu_seconds: float, t: float) -> None:
        """A hold of ``gpu_seconds`` that ended at ``t``."""
        self._ended[team] += gpu_seconds * self._scale(t)

    def at(self, t: float) -> dict[str, float]:
        scale = 1.0 / self._scale(t)
        teams = self._ended.keys() | self._gpus.keys()
        return {
            team: self._ended.get(team, 0.0) * scale + self._gpus.get(team, 0.0) * t - self._gpu_starts.get(team, 0.0)
            for team in teams
        }

    def _scale(self, t: float) -> float:
        return 2.0 ** ((t - self.t0) / FAIR_SHARE_HALF_LIFE_S)
