"""`--limit`: how many clips a limited run takes, and a stratified (not first-N) choice of which.

A limit is a count (an integer >= 1) or a fraction 0 < f < 1 of each config's clips. The clips are
chosen by proportional stratified sampling over every factor a result is broken down by: the source clip
(speaker and sentence), tier, curve, direction and the gold label (the label follows from the direction,
including the unmodified source clips of yes/no and ternary configs). Each draw goes to the grid cell
(tier x curve x direction) whose factors are furthest below their population share, and within the cell
to the source clip furthest below its share; ties break by a permutation drawn from the run's seed. So
any prefix of the draw is balanced to within one clip per factor value, and the same seed and limit give
the same clips on every rank and every rerun.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from vocalgrad_dataset import grid

Limit = int | float


def parse_limit(text: str) -> Limit:
    """A `--limit` value: an integer count >= 1 or a fraction strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--limit expects a count (e.g. 100) or a fraction 0 < f < 1 (e.g. 0.1), got {text!r}") from None
    if value.is_integer() and value >= 1 and "." not in text.strip():
        return int(value)
    if 0 < value < 1:
        return value
    raise ValueError(f"--limit expects a count >= 1 or a fraction 0 < f < 1, got {text!r}")


def check_limit(limit: Limit | None) -> None:
    """Refuse a limit that is neither a count >= 1 nor a fraction in (0, 1)."""
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int | float):
        raise ValueError(f"limit must be a count or a fraction, got {limit!r}")
    if isinstance(limit, int) and limit < 1 or isinstance(limit, float) and not 0 < limit < 1:
        raise ValueError(f"limit must be a count >= 1 or a fraction 0 < f < 1, got {limit!r}")


def limited_count(n: int, limit: Limit | None) -> int:
    """How many of n clips a run with this limit evaluates (a fraction rounds, but keeps at least one)."""
    check_limit(limit)
    if limit is None:
        return n
    if isinstance(limit, float):
        return min(n, max(1, round(limit * n)))
    return min(n, limit)


def _factors(clip_id: str, unit: str) -> tuple[str, tuple[str, str, str]]:
    """(source unit, grid cell) of a clip; ids outside the grid count as one cell."""
    try:
        _, _, cond = grid.parse_any_clip_id(clip_id)
    except ValueError:
        return unit, ("?", "?", "?")
    none = grid.NO_CONDITION
    return unit, (cond.tier, cond.curve, cond.direction) if cond else (none, none, none)


def stratified_ids(units: Sequence[tuple[str, Sequence[str]]], k: int, seed: int = 1234) -> set[str]:
    """k clip ids from (unit key, clip ids) pairs, balanced over source, tier, curve and direction/label."""
    clips = [(cid, *_factors(cid, key)) for key, ids in units for cid in ids]
    if k >= len(clips):
        return {c for c, _, _ in clips}
    rng = np.random.default_rng(seed)
    unit_keys = list(dict.fromkeys(u for _, u, _ in clips))
    unit_rank = {u: int(r) for u, r in zip(unit_keys, rng.permutation(len(unit_keys)), strict=True)}
    pool: dict[tuple[str, str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for cid, unit, cell in clips:
        pool[cell][unit].append(cid)
    cells = list(pool)
    cell_rank = {c: int(r) for c, r in zip(cells, rng.permutation(len(cells)), strict=True)}
    total = len(clips)
    # population shares of every factor value: (factor index, value) -> share
    share: dict[tuple[int, str], float] = Counter()
    for _, unit, cell in clips:
        for f, v in enumerate((*cell, cell, unit)):
            share[(f, str(v))] += 1 / total
    taken: Counter[tuple[int, str]] = Counter()
    chosen: set[str] = set()
    for n in range(1, k + 1):
        def need(cell: tuple[str, str, str], n: int = n) -> tuple[float, int]:
            deficit = sum(share[(f, str(v))] * n - taken[(f, str(v))] for f, v in enumerate((*cell, cell)))
            return (-deficit, cell_rank[cell])

        cell = min((c for c in cells if pool[c]), key=need)
        unit = min(pool[cell], key=lambda u: (taken[(4, u)] - share[(4, u)] * n, unit_rank[u]))
        chosen.add(pool[cell][unit].pop(0))
        if not pool[cell][unit]:
            del pool[cell][unit]
        for f, v in enumerate((*cell, cell, unit)):
            taken[(f, str(v))] += 1
    return chosen


def describe_limit(limit: Limit | None) -> str:
    """How a report names the limit ("first 10" never: the sample is stratified)."""
    if limit is None:
        return "all clips"
    what = f"{limit:g} of each config's clips" if isinstance(limit, float) else f"{limit} clips per config"
    return f"{what}, stratified over source clip, tier, curve and direction"

