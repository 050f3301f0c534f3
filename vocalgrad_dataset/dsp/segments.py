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
from functools import lru_cache

import numpy as np

from vocalgrad_dataset.dsp.schedule import Schedule

CONTEXT_SEC = 0.05
CROSSFADE_SEC = 0.005
# Window samples handed to one call of a window operation (64 MB as float32). A short clip's jobs fit in one
# call (batched across all its conditions); a long source's go in groups, and only each job's centre cut is
# kept between groups, so working memory follows the output, not the windows with their context.
JOB_GROUP_SAMPLES = 16 * 2**20

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
        Chunk(a, b, max(0, a - context), min(span, b + context))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
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


@lru_cache(maxsize=64)
def _fade_out_ramp(length: int) -> np.ndarray:
    """The float32 fade-out ramp 1 -> 0 of a crossfade (the same for every boundary: computed once)."""
    ramp = np.linspace(1.0, 0.0, length, dtype=np.float32)
    ramp.flags.writeable = False
    return ramp


def crossfade_join(
    pieces: Sequence[np.ndarray], fade: int, *, head: np.ndarray | None = None, tail: np.ndarray | None = None
) -> np.ndarray:
    """Join pieces, overlapping each boundary by `fade` samples with a linear fade (shorter if a piece is).

    `head` and `tail` are put before and after the joined pieces without a crossfade, in the same one
    output array (what np.concatenate([head, joined, tail]) gives, without its second copy of the clip).
    """
    head = np.zeros(0, dtype=np.float32) if head is None else head
    tail = np.zeros(0, dtype=np.float32) if tail is None else tail
    total = len(head) + sum(len(p) for p in pieces) + len(tail)
    out = np.empty(total, dtype=np.float32)
    out[: len(head)] = head
    if pieces:
        start = len(head)
        pos = start + len(pieces[0])
        out[start:pos] = pieces[0]
        for piece in pieces[1:]:
            f = min(fade, pos - start, len(piece))
            if f:
                # as published: a float32 fade-out ramp 1 -> 0, and the fade-in is 1 minus it
                fade_out = _fade_out_ramp(f)
                out[pos - f : pos] = out[pos - f : pos] * fade_out + piece[:f] * (np.float32(1.0) - fade_out)
            out[pos : pos + len(piece) - f] = piece[f:]
            pos += len(piece) - f
    else:
        pos = len(head)
    out[pos : pos + len(tail)] = tail
    return out[: pos + len(tail)]


def _job_groups(jobs: Sequence[tuple[int, float]], windows: Sequence[np.ndarray]) -> list[list[int]]:
    """Job indices per op call: all at once when their windows fit in JOB_GROUP_SAMPLES, else groups in
    window order (a window's jobs stay together, so a window's spectrum is still computed once)."""
    if sum(len(windows[k]) for k, _ in jobs) <= JOB_GROUP_SAMPLES:
        return [list(range(len(jobs)))]
    groups: list[list[int]] = [[]]
    size = 0
    for j in sorted(range(len(jobs)), key=lambda j: jobs[j][0]):
        n = len(windows[jobs[j][0]])
        if groups[-1] and size + n > JOB_GROUP_SAMPLES and jobs[j][0] != jobs[groups[-1][-1]][0]:
            groups.append([])
            size = 0
        groups[-1].append(j)
        size += n
    return groups


def _run_jobs(
    op: WindowOp,
    windows: Sequence[np.ndarray],
    job_keys: list[tuple[int, float]],
    chunks: Sequence[Chunk],
    sr: int,
    *,
    stretched: bool,
) -> list[np.ndarray]:
    """Per job: the centre cut of its processed step window, or the whole processed pre/post window."""
    groups = _job_groups(job_keys, windows)
    results: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(job_keys)
    for group in groups:
        keys = [job_keys[j] for j in group]
        for j, (k, v), processed in zip(group, keys, op(windows, keys, sr), strict=True):
            if k < len(chunks):  # a step's window: only its centre is used
                centre = cut_centre(processed, chunks[k], v, stretched=stretched)
                results[j] = centre.copy() if len(groups) > 1 else centre  # a copy frees the context
            else:
                results[j] = processed
    return results


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
    """Render every schedule of one clip through the segment framework with batched calls of `op`.

    Outside the speech span, audio is processed as one window at the start (before onset) and end
    (from offset on) value when `process_outside`, else left unchanged.
    """
    if not schedules:
        return []
    first = schedules[0]
    onset, offset = first.onset, first.offset
    if any((s.onset, s.offset, s.step) != (onset, offset, first.step) for s in schedules):
        raise ValueError(
            "render_segmented renders conditions of one clip: onsets, offsets and steps must agree"
        )
    span = audio[onset:offset]
    chunks = plan_chunks(
        len(span), first.n_steps, first.step, int(round(CONTEXT_SEC * sr)), equal_split=equal_split
    )
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
    results = _run_jobs(op, windows, list(jobs), chunks, sr, stretched=stretched)

    fade = int(round(CROSSFADE_SEC * sr))
    outputs = []
    for s in schedules:
        centres = [results[jobs[(k, float(v))]] for k, v in enumerate(s.values)]
        pre, post = windows[pre_idx], windows[post_idx]
        if process_outside:
            pre = results[jobs[(pre_idx, s.start)]] if len(pre) else pre
            post = results[jobs[(post_idx, s.end)]] if len(post) else post
        outputs.append(crossfade_join(centres, fade, head=pre, tail=post))
    return outputs


def per_window(fn: Callable[[np.ndarray, float, int], np.ndarray]) -> WindowOp:
    """Lift a single-window function fn(window, value, sr) to a WindowOp (one call per job)."""

    def op(windows: Sequence[np.ndarray], jobs: Sequence[tuple[int, float]], sr: int) -> list[np.ndarray]:
        return [fn(windows[k], v, sr) for k, v in jobs]

    return op
