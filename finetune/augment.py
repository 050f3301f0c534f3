"""Optional nuisance augmentation of training clips (audiomentations), never touching the trained attribute.

Every transform here is static over the clip (one gain, one EQ bump, one noise floor, one polarity), so it
cannot reverse a rise or fall over time; on top of that, a transform is left out for every category whose
attribute it acts on: gain for volume; added noise for noise, roughness, and for distortion and clarity,
whose cue is missing high-band content that a noise floor would fill; EQ for clarity, distortion and
roughness, whose quantisation grid a filter would smear.
Each clip's draw is seeded from (seed, epoch, clip id): identical on resume and on any number of processes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.data import BenchRow
from vocalgrad_dataset import grid
from vocalgrad_dataset.tasks import resolve


@dataclass(frozen=True)
class Nuisance:
    """One audiomentations transform, its settings and the categories whose attribute it would touch."""

    name: str
    transform: str  # audiomentations class name
    params: dict[str, Any] = field(default_factory=dict)
    touches: frozenset[str] = frozenset()


CATALOG: tuple[Nuisance, ...] = (
    Nuisance("gain", "Gain", {"min_gain_db": -6.0, "max_gain_db": 6.0, "p": 0.5}, frozenset({"volume"})),
    Nuisance("polarity", "PolarityInversion", {"p": 0.5}),
    Nuisance("peaking_eq", "PeakingFilter",
             {"min_center_freq": 200.0, "max_center_freq": 4000.0, "min_gain_db": -6.0, "max_gain_db": 6.0,
              "min_q": 0.5, "max_q": 2.0, "p": 0.5}, frozenset({"clarity", "distortion", "roughness"})),
    Nuisance("gaussian_snr", "AddGaussianSNR", {"min_snr_db": 35.0, "max_snr_db": 50.0, "p": 0.5},
             frozenset({"noise", "roughness", "distortion", "clarity"})),
)


def nuisances_for(category: str) -> list[Nuisance]:
    """The catalog's transforms that leave `category`'s attribute alone."""
    config = resolve(category)
    return [n for n in CATALOG if config not in n.touches]


def describe(category: str) -> list[dict[str, Any]]:
    """What augmentation a category's training applies (recorded in training.json and the model card)."""
    return [{"name": n.name, "transform": n.transform, "params": dict(n.params)} for n in nuisances_for(category)]


def build_augmenter(category: str, seed: int, *, p: float | None = None) -> Callable[[BenchRow, int], BenchRow]:
    """A function (row, epoch) -> row with augmented audio, deterministic per (seed, epoch, clip id).

    `p` overrides every transform's probability (tests use 1.0 to apply all of them).
    """
    import audiomentations

    chain = audiomentations.Compose(
        [getattr(audiomentations, n.transform)(**{**n.params, **({"p": p} if p is not None else {})})
         for n in nuisances_for(category)], p=1.0
    )

    def apply(row: BenchRow, epoch: int) -> BenchRow:
        audio = row["audio"]
        # audiomentations draws from the global `random` and numpy generators: seed them for this clip,
        # then put them back so nothing else in the process sees a different stream.
        py_state, np_state = random.getstate(), np.random.get_state()
        s = grid.seed_from(f"augment:{seed}:{epoch}:{row['benchmark_clip_id']}")
        random.seed(s)
        np.random.seed(s % 2**32)
        try:
            y = chain(samples=np.asarray(audio["array"], dtype=np.float32), sample_rate=int(audio["sampling_rate"]))
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
        y = np.clip(y, -1.0, 1.0).astype(np.float32)  # a +6 dB draw must not wrap around in PCM later
        return {**row, "audio": {"array": y, "sampling_rate": audio["sampling_rate"]}}

    return apply
