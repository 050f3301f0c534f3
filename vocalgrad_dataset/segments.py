"""The one segment framework (SPEC §2): context windows, centre cuts, and the 5 ms crossfade join.

Speed, pitch, distortion, roughness and clarity process each 50 ms step of the speech span together
with +-50 ms of context, cut the step's centre back out, and join consecutive centres with a linear
crossfade that overlaps them (so the span shrinks by 5 ms per join, as in the published stimuli).
All conditions of one source clip share the same windows, so a category's window operation receives
every (window, value) job of a clip at once and can batch or cache across conditions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .schedule import Schedule

CONTEXT_SEC = 0.05
CROSSFADE_SEC = 0.005

# windows, jobs (window index, value), sr -> processed window per job
WindowOp = Callable[[Sequence[np.ndarray], Sequence[tuple[int, float]], int], list[np.ndarray]]


@dataclass(frozen=True)
class Chunk:
    """A step's centre [start, end) and its context window [win_start, win_end), relative to the span."""

    start: int
    end: int
    win_start: int
    win_end: int


def plan_chunks(span: int, n_steps: int, step: int, context: int, *, equal_split: bool) -> list[Chunk]:
    """Chunk bounds: round(k * L / n) for speed (equal_split), k * step for the other categories."""
    if equal_split:
        bounds = [int(round(k * span / n_steps)) for k in range(n_steps + 1)]
    else:
        bounds = [min(k * step, span) for k in range(n_steps + 1)]
    return [
        Chunk(a, b, max(0, a - context), min(span, b + context)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]


def cut_centre(processed: np.ndarray, chunk: Chunk, value: float, *, stretched: bool) -> np.ndarray:
    """The step's own samples out of its processed window (time-stretched windows scale by 1 / rate)."""
    a = chunk.start - chunk.win_start
    if not stretched:
        return processed[a : a + (chunk.end - chunk.start)]
    b = chunk.end - chunk.win_start
    n = len(processed)
    i0, i1 = min(max(int(a / value), 0), n), min(max(int(b / value), 0), n)
    if i1 <= i0:  # an empty cut keeps one sample so that every step contributes
        i0 = min(i0, n - 1)
        i1 = i0 + 1
    return processed[i0:i1]


def crossfade_join(pieces: Sequence[np.ndarray], fade: int) -> np.ndarray:
    """Join pieces, overlapping each boundary by `fade` samples with a linear fade (shorter if a piece is)."""
    if not pieces:
        return np.zeros(0, dtype=np.float32)
    total = sum(len(p) for p in pieces)
    out = np.empty(total, dtype=np.float32)
    pos = len(pieces[0])
    out[:pos] = pieces[0]
    for piece in pieces[1:]:
        f = min(fade, pos, len(piece))
        if f:
            # as published: a float32 fade-out ramp 1 -> 0, and the fade-in is 1 minus it
            fade_out = np.linspace(1.0, 0.0, f, dtype=np.float32)
            out[pos - f : pos] = out[pos - f : pos] * fade_out + piece[:f] * (np.float32(1.0) - fade_out)
        out[pos : pos + len(piece) - f] = piece[f:]
        pos += len(piece) - f
    return out[:pos]


def render_segmented(
    audio: np.ndarray,
    sr: int,
    schedules: Sequence[Schedule],
    op: WindowOp,
    *,
    stretched: bool = False,
    equal_split: bool = False,
    process_outside: bool = True,
) -> list[np.ndarray]:
    """Render every schedule of one clip through the segment framework with one batched call of `op`.

    Outside the speech span, audio is processed as one window at the start (before onset) and end
    (from offset on) value when `process_outside`, else left unchanged.
    """
    if not schedules:
        return []
    first = schedules[0]
    onset, offset = first.onset, first.offset
    if any((s.onset, s.offset, s.step) != (onset, offset, first.step) for s in schedules):
        raise ValueError("render_segmented renders conditions of one clip: onsets, offsets and steps must agree")
    span = audio[onset:offset]
    chunks = plan_chunks(len(span), first.n_steps, first.step, int(round(CONTEXT_SEC * sr)), equal_split=equal_split)
    windows = [span[c.win_start : c.win_end] for c in chunks]
    pre_idx, post_idx = len(windows), len(windows) + 1
    windows += [audio[:onset], audio[offset:]]

    jobs: dict[tuple[int, float], int] = {}
    for s in schedules:
        for k, v in enumerate(s.values):
            jobs.setdefault((k, float(v)), len(jobs))
        if process_outside:
            for idx, v in ((pre_idx, s.start), (post_idx, s.end)):
                if len(windows[idx]):
                    jobs.setdefault((idx, float(v)), len(jobs))
    results = op(windows, list(jobs), sr)

    fade = int(round(CROSSFADE_SEC * sr))
    outputs = []
    for s in schedules:
        centres = [
            cut_centre(results[jobs[(k, float(v))]], c, float(v), stretched=stretched)
            for k, (c, v) in enumerate(zip(chunks, s.values, strict=True))
        ]
        joined = crossfade_join(centres, fade)
        pre, post = windows[pre_idx], windows[post_idx]
        if process_outside:
            pre = results[jobs[(pre_idx, s.start)]] if len(pre) else pre
            post = results[jobs[(post_idx, s.end)]] if len(post) else post
        outputs.append(np.concatenate([pre, joined, post]).astype(np.float32, copy=False))
    return outputs


def per_window(fn: Callable[[np.ndarray, float, int], np.ndarray]) -> WindowOp:
    """Lift a single-window function fn(window, value, sr) to a WindowOp (one call per job)."""

    def op(windows: Sequence[np.ndarray], jobs: Sequence[tuple[int, float]], sr: int) -> list[np.ndarray]:
        return [fn(windows[k], v, sr) for k, v in jobs]

    return op
