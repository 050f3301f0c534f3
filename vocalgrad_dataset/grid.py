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


@dataclass(frozen=True)
class Recipe:
    """How the generator makes a config's rows (declared in its YAML file, `recipe:`): which clips (the 24
    augmented conditions of each source clip, the unmodified source clip, the claims carriers, played
    backwards) and which labels they carry. A recipe is not a kind: it asks nothing and scores nothing."""

    name: str  # shown by `vocalgrad-dataset list --configs`
    labels: tuple[str, ...]  # the `label` ClassLabel's names, in order
    augmented: bool = True  # a row per condition of the grid
    sources: bool = False  # a row for the unmodified source clip (id item__clip__source)
    changed: str | None = None  # an augmented row's label (None: its condition's direction word)
    unchanged: str | None = None  # a source row's label
    claims: bool = False  # carriers whose words claim a direction (the claims source by default)
    reverse: bool = False  # each clip is the opposite condition's rendering played backwards

    def label(self, cond: Condition | None) -> str:
        """Gold label of a row: `changed` (else the condition's direction word), `unchanged` for a source row."""
        if cond is None:
            if self.unchanged is None:
                raise ValueError(f"recipe {self.name!r} has no unmodified source rows")
            return self.unchanged
        return self.changed or cond.label


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
