"""Balanced item sampling for a listening test (SPEC §8: direction is never tied to the curve).

For N items of one config the sampler splits the changed clips into up/down *pairs* and spreads the pairs
over the 12 tier x curve cells: every cell gets N_pairs // 12 pairs, and the remaining pairs go to cells
k = 0, 1, ... mapped to (tier k mod 3, curve k mod 4) under a seeded permutation of tiers and curves (3 and 4
are coprime, so the extra pairs land in distinct cells and every tier and every curve count differs by at
most one). Each cell therefore holds exactly as many "up" as "down" items, so a direction can never be
predicted from the curve or the tier. Yes/no and ternary configs add unmodified source clips (half of the
items for yes/no, a third for ternary, capped by what the source has). Clips are then drawn greedily so that
speakers and source clips are used as evenly as possible, with a seeded random tie-break: the same
(config, source, n, seed) gives the same items.
"""

from __future__ import annotations

import csv
import random
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from vocalgrad_dataset import grid
from vocalgrad_dataset.generate import config_clips, frozen_items, resolve_source, source_clips, unit_ids
from vocalgrad_dataset.sources.vctk import SELECTION_DIR, SPLIT_FILES
from vocalgrad_dataset.tasks import ConfigSpec, config_spec

SAMPLER_VERSION = "1"


@dataclass(frozen=True)
class PoolClip:
    """One clip the sampler may draw (no audio: ids and the speaker only)."""

    benchmark_clip_id: str
    source_item_id: str
    source_clip_id: str
    speaker_id: str
    tier: str
    curve: str
    direction: str
    gold: str


@dataclass(frozen=True)
class SampleItem:
    """A drawn item: what the `sample` command prints, one JSON line each."""

    benchmark_clip_id: str
    config: str
    tier: str
    curve: str
    direction: str
    gold: str
    source_item_id: str
    source_clip_id: str
    speaker_id: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def _pool_rows(spec: ConfigSpec, items: Iterable[tuple[str, str, str]]) -> list[PoolClip]:
    """PoolClips of (source_item_id, source_clip_id, speaker) triples for a config."""
    out = []
    for item, clip, speaker in items:
        for cid in unit_ids(spec, item, clip):
            _, _, cond = grid.parse_any_clip_id(cid)
            none = grid.NO_CONDITION
            out.append(PoolClip(cid, item, clip, speaker or item, cond.tier if cond else none,
                                cond.curve if cond else none, cond.direction if cond else none,
                                spec.recipe.label(cond)))
    return out


def _vctk_speakers(split: str) -> dict[str, str]:
    """source_item_id -> speaker of the frozen VCTK list (read without the corpus)."""
    fname, id_col = SPLIT_FILES[split]
    with open(SELECTION_DIR / fname, newline="", encoding="utf-8") as f:
        return {r[id_col]: r["speaker_id"] for r in csv.DictReader(f)}


def _dataset_items(dataset: str | Path, config: str, split: str) -> list[tuple[str, str, str]]:
    """(item, clip, speaker) of a Parquet build or release folder, from its id (and speaker) columns."""
    from harness.data import open_source

    src = open_source(split, dataset=str(dataset))
    speakers: dict[str, str] = {}
    files = sorted((Path(dataset) / config_spec(config).name).glob(f"{split}-*.parquet"))
    if files:
        import pyarrow.parquet as pq

        names = set(pq.read_schema(files[0]).names)
        if "speaker_id" in names:
            t = pq.read_table(files, columns=["benchmark_clip_id", "speaker_id"]).to_pydict()
            speakers = dict(zip(t["benchmark_clip_id"], t["speaker_id"], strict=True))
    out = []
    for unit in src.units(config):
        item, clip, _ = grid.parse_any_clip_id(unit.clip_ids[0])
        out.append((item, clip, str(speakers.get(unit.clip_ids[0]) or item)))
    return out


def candidate_pool(config: str, split: str = "test", source: str | None = None, data_dir: str | None = None,
                   dataset: str | None = None) -> list[PoolClip]:
    """Every clip of a config a sample may draw, from a Parquet build, the frozen VCTK list (no corpus
    needed) or the source's clip list."""
    spec = config_spec(config)
    if dataset is not None:
        items = _dataset_items(dataset, spec.name, split)
    else:
        name = resolve_source(spec.name, source)
        if name == "vctk" and data_dir is None:
            speakers = _vctk_speakers(split)
            items = [(i, c, speakers[i]) for i, c in frozen_items(split)]
        else:
            # a conflict config draws only its own category's carriers and the neutral ones
            items = [(c.source_item_id, c.source_clip_id, c.speaker_id)
                     for c in config_clips(spec, source_clips(split, name, data_dir))]
    return _pool_rows(spec, items)


def _cell_pairs(n_pairs: int, rng: random.Random) -> dict[tuple[str, str], int]:
    """Up/down pairs per (tier, curve) cell: an even base, the remainder on a tier- and curve-balanced set."""
    tiers, curves = list(grid.TIERS), list(grid.CURVES)
    rng.shuffle(tiers)
    rng.shuffle(curves)
    base, rem = divmod(n_pairs, len(tiers) * len(curves))
    pairs = {(t, c): base for t in grid.TIERS for c in grid.CURVES}
    for k in range(rem):  # k -> (k mod 3, k mod 4) is one-to-one on 0..11 (Chinese remainder theorem)
        pairs[(tiers[k % len(tiers)], curves[k % len(curves)])] += 1
    return pairs


def constant_share(spec: ConfigSpec) -> float:
    """The share of unmodified clips in a sample: one label's worth where the recipe mixes them with the
    augmented clips (yes/no 1/2, ternary 1/3), else none."""
    return 1 / len(spec.labels) if spec.recipe.sources and spec.recipe.augmented else 0.0


def _split_counts(spec: ConfigSpec, n: int, n_sources: int) -> tuple[int, int]:
    """(changed, unmodified) item counts for n items of a config."""
    if n <= 0:
        raise ValueError(f"--n must be positive, got {n}")
    if not spec.recipe.augmented:
        return 0, n
    n_const = round(n * constant_share(spec))
    if n_const > n_sources:
        print(f"warning: {spec.name}: {n_const} unmodified clips wanted but the source has {n_sources}; "
              f"the unchanged class is under-represented", file=sys.stderr)
        n_const = n_sources
    n_changed = n - n_const
    if n_changed % 2:
        if not spec.recipe.sources:
            raise ValueError(f"--n must be even for {spec.name!r} so that the directions split evenly, got {n}")
        n_const, n_changed = (n_const + 1, n_changed - 1) if n_const < n_sources else (n_const - 1, n_changed + 1)
    return n_changed, n_const


def balanced_sample(pool: Sequence[PoolClip], config: str, n: int, seed: int = 0) -> list[SampleItem]:
    """n items of a config, balanced over direction x tier x curve, spread over speakers and sources."""
    spec = config_spec(config)
    rng = random.Random(grid.seed_from(f"vocalgrad-listen:{SAMPLER_VERSION}:{spec.name}:{n}:{seed}"))
    by_condition: dict[tuple[str, str, str], list[PoolClip]] = defaultdict(list)
    for clip in pool:
        by_condition[(clip.tier, clip.curve, clip.direction)].append(clip)
    none = grid.NO_CONDITION
    n_sources = len(by_condition.get((none, none, none), []))
    n_changed, n_const = _split_counts(spec, n, n_sources)
    slots: list[tuple[str, str, str]] = [(none, none, none)] * n_const
    for (tier, curve), k in _cell_pairs(n_changed // 2, rng).items():
        slots += [(tier, curve, d) for d in grid.DIRECTIONS for _ in range(k)]
    need = Counter(slots)
    short = {s: (k, len(by_condition.get(s, []))) for s, k in need.items() if k > len(by_condition.get(s, []))}
    if short:
        (cond, (k, have)), *_ = sorted(short.items())
        raise ValueError(f"{spec.name}: n={n} needs {k} clips of condition {'/'.join(cond)} but the source has only "
                         f"{have}; use a smaller --n")
    rng.shuffle(slots)
    speaker_use: Counter[str] = Counter()
    source_use: Counter[str] = Counter()
    cell_use: Counter[tuple[str, str, str]] = Counter()
    taken: set[str] = set()
    chosen: list[PoolClip] = []
    for tier, curve, direction in slots:
        free = [c for c in by_condition[(tier, curve, direction)] if c.benchmark_clip_id not in taken]
        best = min(free, key=lambda c: (speaker_use[c.speaker_id], source_use[c.source_item_id],
                                        cell_use[(c.source_item_id, tier, curve)], rng.random()))
        taken.add(best.benchmark_clip_id)
        speaker_use[best.speaker_id] += 1
        source_use[best.source_item_id] += 1
        cell_use[(best.source_item_id, tier, curve)] += 1
        chosen.append(best)
    return [SampleItem(c.benchmark_clip_id, spec.name, c.tier, c.curve, c.direction, c.gold, c.source_item_id,
                       c.source_clip_id, c.speaker_id) for c in chosen]


def draw(config: str, n: int, seed: int = 0, *, split: str = "test", source: str | None = None,
         data_dir: str | None = None, dataset: str | None = None) -> list[SampleItem]:
    """candidate_pool + balanced_sample: the items of a listening test."""
    return balanced_sample(candidate_pool(config, split, source, data_dir, dataset), config, n, seed)
