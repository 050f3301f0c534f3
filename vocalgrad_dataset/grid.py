"""The 24-condition grid of SPEC §2: tiers x curves x directions, clip ids and progress curves."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

TIERS: tuple[str, ...] = ("low", "mid", "high")
CURVES: tuple[str, ...] = ("linear", "quad_first_flat", "quad_last_flat", "jump")
DIRECTIONS: tuple[str, ...] = ("up", "down")
LABELS: tuple[str, ...] = ("decrease", "increase")  # ClassLabel order: 0 = decrease, 1 = increase
LABEL_OF_DIRECTION: dict[str, str] = {"up": "increase", "down": "decrease"}

# Problem formats (SPEC §4) and their ClassLabel names. Ternary keeps decrease/increase at 0/1 so a
# direction model's integer labels mean the same thing in both; "source" rows are the 100 unmodified
# clips alone (asked the main question, for the source-clip bias measurement).
FORMAT_LABELS: dict[str, tuple[str, ...]] = {
    "direction": LABELS,
    "yesno": ("no", "yes"),
    "ternary": ("decrease", "increase", "constant"),
    "source": ("decrease", "increase", "constant"),
    # lexical conflict: speech whose words claim a direction (the claims source); -reversed plays it backwards
    "conflict": LABELS,
    "conflict-reversed": LABELS,
}
CLAIM_FORMATS: tuple[str, ...] = ("conflict", "conflict-reversed")
OPPOSITE: dict[str, str] = {"up": "down", "down": "up"}
SOURCE_SUFFIX = "source"  # last field of an unmodified source clip's id: item__clip__source
NO_CONDITION = "none"  # direction/curve/tier of a source-clip row

# sha256 of "\n".join(sorted(ids)) over one category's 2,400 test ids, and over the 240 beep ids.
TEST_IDS_SHA256 = "0ed4dd6472cdf8ae9e3b2fd45fbef6b506b52021f896a9093fe0124fba9114e8"
BEEP_IDS_SHA256 = "74b5ce1fbcc33806f6898ce7f0bb7c3012fa5a95410ee52ff88876c734089b77"


@dataclass(frozen=True)
class Condition:
    """One cell of the grid: which curve, how strong, which way."""

    curve: str
    tier: str
    direction: str

    @property
    def label(self) -> str:
        return LABEL_OF_DIRECTION[self.direction]


def conditions() -> list[Condition]:
    """All 24 conditions in the order rows are generated (curve, tier, direction)."""
    return [Condition(c, t, d) for c in CURVES for t in TIERS for d in DIRECTIONS]


def clip_id(source_item_id: str, source_clip_id: str, cond: Condition) -> str:
    """The published `benchmark_clip_id`: item__clip__curve__tier__direction."""
    return f"{source_item_id}__{source_clip_id}__{cond.curve}__{cond.tier}__{cond.direction}"


def parse_clip_id(benchmark_clip_id: str) -> tuple[str, str, Condition]:
    """Inverse of :func:`clip_id`; raises ValueError naming the id when it is malformed."""
    parts = benchmark_clip_id.split("__")
    if len(parts) != 5 or parts[2] not in CURVES or parts[3] not in TIERS or parts[4] not in DIRECTIONS:
        raise ValueError(f"not a VocalGrad clip id: {benchmark_clip_id!r}")
    return parts[0], parts[1], Condition(parts[2], parts[3], parts[4])


def source_clip_id(source_item_id: str, source_clip_id: str) -> str:
    """Id of an unmodified source clip in the yes/no and ternary formats: item__clip__source."""
    return f"{source_item_id}__{source_clip_id}__{SOURCE_SUFFIX}"


def parse_any_clip_id(benchmark_clip_id: str) -> tuple[str, str, Condition | None]:
    """Like :func:`parse_clip_id`, but also accepts source-clip ids (their condition is None)."""
    parts = benchmark_clip_id.split("__")
    if len(parts) == 3 and parts[2] == SOURCE_SUFFIX:
        return parts[0], parts[1], None
    return parse_clip_id(benchmark_clip_id)


def format_label(fmt: str, cond: Condition | None) -> str:
    """Gold label of a row: a condition's direction word, "yes" for any change, "no"/"constant" for a source."""
    if fmt not in FORMAT_LABELS:
        raise ValueError(f"unknown problem format {fmt!r}; valid: {', '.join(FORMAT_LABELS)}")
    if cond is None:
        return "no" if fmt == "yesno" else "constant"
    return "yes" if fmt == "yesno" else cond.label


def ids_sha256(ids: Iterable[str]) -> str:
    """SPEC §2 check value: sha256 of the sorted ids joined by newlines (no trailing newline)."""
    return hashlib.sha256("\n".join(sorted(ids)).encode("utf-8")).hexdigest()


def progress(curve: str, t: np.ndarray | float) -> np.ndarray:
    """Progress p(t) in [0, 1] for a curve; t in [0, 1] (float64)."""
    t = np.asarray(t, dtype=np.float64)
    if curve == "linear":
        return t
    if curve == "quad_first_flat":
        return t * t
    if curve == "quad_last_flat":
        return 1.0 - (1.0 - t) ** 2
    if curve == "jump":
        return np.where(t < 0.5, 0.0, 1.0)
    raise ValueError(f"unknown curve {curve!r}; expected one of {CURVES}")


def seed_from(text: str) -> int:
    """Integer from the first 8 bytes (big-endian) of sha256(text): the per-clip seeds of SPEC §3 and §5."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def iter_ids(items: Iterable[tuple[str, str]]) -> Iterator[str]:
    """Clip ids for (source_item_id, source_clip_id) pairs, 24 per pair, in generation order."""
    grid = conditions()
    for item, clip in items:
        for cond in grid:
            yield clip_id(item, clip, cond)
