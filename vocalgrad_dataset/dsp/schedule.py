"""Parameter schedules over the speech span (SPEC §2): stepped (50 ms steps) and continuous (per sample)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from vocalgrad_dataset.grid import progress

STEP_SEC = 0.05
CACHED_SPAN = 2**22  # per-sample progress curves up to this span (87 s at 48 kHz) are shared by a clip's conditions


def step_samples(sr: int) -> int:
    """Samples per step: round(0.05 * sr)."""
    return int(round(STEP_SEC * sr))


@dataclass(frozen=True)
class Schedule:
    """Where the speech span lies and which parameter value applies where.

    `values` holds one value per 50 ms step (stepped) or per span sample (continuous);
    audio before `onset` uses `start`, audio from `offset` on uses `end`.
    """

    onset: int
    offset: int
    n_samples: int
    start: float
    end: float
    values: np.ndarray  # float64
    step: int  # samples per step (stepped); 1 for continuous
    continuous: bool = False
    curve: str = "linear"  # the progress curve the values follow

    def rescaled(self, start: float, end: float) -> Schedule:
        """The same curve over the same span between other endpoints (e.g. vibration's LFO rate beside its depth)."""
        if self.continuous:
            return continuous(self.onset, self.offset, self.n_samples, start, end, self.curve)
        return _stepped(self.onset, self.offset, self.n_samples, self.step, start, end, self.curve)

    @property
    def span(self) -> int:
        return self.offset - self.onset

    @property
    def n_steps(self) -> int:
        return len(self.values)

    def per_sample(self) -> np.ndarray:
        """The parameter at every sample of the clip (float64)."""
        out = np.empty(self.n_samples, dtype=np.float64)
        out[: self.onset] = self.start
        out[self.offset :] = self.end
        if self.continuous:
            out[self.onset : self.offset] = self.values
        else:
            out[self.onset : self.offset] = np.repeat(self.values, self.step)[: self.span]
        return out


def stepped(onset: int, offset: int, n_samples: int, sr: int, start: float, end: float, curve: str) -> Schedule:
    """Step k of n = ceil(span / step) uses t = k / (n - 1) (t = 1 when n <= 1)."""
    return _stepped(onset, offset, n_samples, step_samples(sr), start, end, curve)


def _stepped(onset: int, offset: int, n_samples: int, step: int, start: float, end: float, curve: str) -> Schedule:
    n = math.ceil((offset - onset) / step)
    t = np.arange(n, dtype=np.float64) / (n - 1) if n > 1 else np.ones(n, dtype=np.float64)
    values = start + (end - start) * progress(curve, t)
    return Schedule(onset, offset, n_samples, float(start), float(end), values, step, curve=curve)


def continuous(onset: int, offset: int, n_samples: int, start: float, end: float, curve: str) -> Schedule:
    """Per-sample t = linspace(0, 1, span) over the speech span."""
    span = offset - onset
    p = _span_progress(span, curve) if span <= CACHED_SPAN else progress(curve, np.linspace(0.0, 1.0, span))
    values = start + (end - start) * p
    return Schedule(onset, offset, n_samples, float(start), float(end), values, 1, continuous=True, curve=curve)


@lru_cache(maxsize=8)
def _span_progress(span: int, curve: str) -> np.ndarray:
    """progress(curve, linspace(0, 1, span)), computed once per span and curve (read-only)."""
    p = np.array(progress(curve, np.linspace(0.0, 1.0, span)))
    p.flags.writeable = False
    return p
