"""Volume: gain -d -> +d dB (up) in hard 50 ms steps, no crossfade, on the raw integer scale in float64."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from vocalgrad_dataset.categories.base import Category, register
from vocalgrad_dataset.dsp.schedule import Schedule


def step_gains(schedule: Schedule) -> np.ndarray:
    """Linear gains 10 ** (dB / 20): before onset, one per 50 ms step, from offset on (float64, as published)."""
    return 10.0 ** (np.concatenate([[schedule.start], schedule.values, [schedule.end]]) / 20.0)


def apply_gains(x: np.ndarray, schedule: Schedule) -> np.ndarray:
    """x (float32 or float64) times its step's scalar gain in float64, block by block (no per-sample gain array)."""
    gains = step_gains(schedule)
    on, off, step = schedule.onset, schedule.offset, schedule.step
    y = np.empty(len(x), dtype=np.float64)  # float32 x: each sample cast to float64 exactly, then multiplied
    np.multiply(x[:on], gains[0], out=y[:on])
    np.multiply(x[off:], gains[-1], out=y[off:])
    full = (off - on) // step
    cut = on + full * step
    np.multiply(x[on:cut].reshape(full, step), gains[1 : 1 + full, None], out=y[on:cut].reshape(full, step))
    if cut < off:  # the last, shorter step
        np.multiply(x[cut:off], gains[1 + full], out=y[cut:off])
    return y


def _render(audio: np.ndarray, sr: int, schedules: Sequence, fixed: dict) -> Iterator[np.ndarray]:
    # The published gain multiplies the raw integer samples in float64. audio is PCM16 / 32768, and scaling
    # by a power of two is exact, so audio * gain here is exactly raw * gain / 32768 (PCM16 output sees raw * gain).
    # A float64 copy shared by a batch's conditions saves each one the cast; a long source renders one condition
    # per call, where the copy would be a second whole-clip float64 array (0.46 GB at 20 minutes) for nothing.
    x = audio.astype(np.float64) if len(schedules) > 1 else audio
    for s in schedules:  # one at a time: each output is converted and freed before the next is made
        yield apply_gains(x, s)


CATEGORY = register(
    Category(
        name="volume",
        attribute="volume",
        release_name="volume",
        parameter="gain_db",
        tier_key="delta_gain_db",
        endpoints=lambda d, sr: (-d, d),
        render=_render,
        description="stepped gain; before onset the start gain, from offset on the end gain",
    )
)
