"""Multiple-choice items in a listening test (VoxParadox-lite `voxparadox-<task>`: harness.kinds.choice).

A listener hears an item and picks one of its 2-4 lettered options; the answer is stored as the option's
text, scored against the item's true label (`answer`) and compared with the label its transcript asserts
(`adversarial`: agreement with it is VoxParadox's ALA). Items come from a `vocalgrad-dataset build` of the
config (`--dataset D`, the frozen items) or, without one, from the item builder itself: the first items of
the split in build order (a seeded shuffle), enough for the sample, the training examples and the catch
trials with room to balance; the study records how many, so the audio is rebuilt identically on demand.

An item's question, options and adversarial label live in the study's record (`study["items"]`), so the
database schema is the one the direction configs use (tier, curve and direction are "none").
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.data import BenchRow, SourceUnit, built_item_row
from harness.kinds import task_kind
from harness.mcq import mcq_text, normalize_mcq_row
from harness.parsing import mcq_vocabulary
from listening.sampler import SAMPLER_VERSION, SampleItem
from vocalgrad_dataset import grid

SOURCE_NAME = "voxparadox-lite"  # the item builder, as a study's `source`
POOL_FACTOR = 3  # items built per needed item when no build is given (room to balance the true labels)


@dataclass(frozen=True)
class McqItem:
    """One multiple-choice item a study may draw (no audio)."""

    benchmark_clip_id: str
    config: str
    question: str
    options: tuple[str, ...]
    answer: str
    adversarial: str | None
    speaker_id: str  # the voice of its first segment (spread over the sample like VCTK speakers)

    def sample_item(self) -> SampleItem:
        """As the study's item table holds it: gold = the true option's text, no tier/curve/direction."""
        none = grid.NO_CONDITION
        return SampleItem(self.benchmark_clip_id, self.config, none, none, none, self.answer, self.benchmark_clip_id,
                          self.benchmark_clip_id, self.speaker_id)

    def record(self) -> dict[str, Any]:
        """What the page and the export need besides the item table (kept in the study record)."""
        return {"question": self.question, "options": list(self.options), "adversarial": self.adversarial}


def _voice(bases: Sequence[str] | None, fallback: str) -> str:
    """The voice of an item's first base utterance ("m1p35__train-pitch-low" -> "m1p35")."""
    return str(bases[0]).split("__")[0] if bases else fallback


def _from_row(row: Mapping[str, Any], config: str, bases: Sequence[str] | None) -> McqItem:
    checked = normalize_mcq_row(row, config, config, kind=task_kind(config).name)
    return McqItem(checked["benchmark_clip_id"], config, checked["question"], tuple(checked["options"]),
                   checked["answer"], checked["adversarial"], _voice(bases, checked["benchmark_clip_id"]))


def built_pool(config: str, split: str, dataset: str) -> list[McqItem]:
    """Every item of a config's split in a `vocalgrad-dataset build` folder (no audio decoded)."""
    import pyarrow.parquet as pq

    from harness.data import open_source

    source = open_source(split, dataset=dataset)
    source.units(config)  # the build's own checks: shards, duplicated ids, manifest
    files = sorted((source.path / config).glob(f"{split}-*.parquet"))  # type: ignore[attr-defined]
    columns = ["benchmark_clip_id", "question", "options", "answer", "adversarial", "bases"]
    out = []
    for file in files:
        names = set(pq.read_schema(file).names)
        table = pq.read_table(file, columns=[c for c in columns if c in names]).to_pylist()
        out += [_from_row({**r, "audio": None}, config, r.get("bases")) for r in table]
    return out


def builder_pool(config: str, split: str, n: int) -> list[McqItem]:
    """The first n items of a config's split, made by the item builder (voxparadox.export.config_items)."""
    from vocalgrad_dataset.voxparadox.export import config_items

    return [_from_row({"benchmark_clip_id": i.id, "question": i.question, "options": i.options, "answer": i.answer,
                       "adversarial": i.adversarial, "audio": None}, config, i.bases)
            for i in config_items(config, split, n)]


def pool_size(n: int, catch: int) -> int:
    """Items built for a study of n items per config with `catch` catch trials and two training examples."""
    return POOL_FACTOR * (n + catch + 2)


def balanced_items(pool: Sequence[McqItem], config: str, n: int, seed: int = 0,
                   avoid: Sequence[str] = ()) -> list[McqItem]:
    """n items whose true labels are as even as the pool allows (labels taken in turn, fewest first), each
    from the least used voice, seeded tie-breaks: the same (config, pool, n, seed) gives the same items."""
    if n <= 0:
        raise ValueError(f"--n must be positive, got {n}")
    free = [it for it in pool if it.benchmark_clip_id not in set(avoid)]
    if n > len(free):
        raise ValueError(f"{config}: n={n} items wanted but only {len(free)} are left in the pool; use a smaller --n")
    rng = random.Random(grid.seed_from(f"vocalgrad-listen-mcq:{SAMPLER_VERSION}:{config}:{n}:{seed}"))
    by_label: dict[str, list[McqItem]] = defaultdict(list)
    for it in free:
        by_label[it.answer].append(it)
    for items in by_label.values():
        rng.shuffle(items)
    taken: Counter[str] = Counter()
    voices: Counter[str] = Counter()
    chosen: list[McqItem] = []
    while len(chosen) < n:
        label = min((lab for lab, items in by_label.items() if items), key=lambda lab: (taken[lab], lab))
        best = min(by_label[label], key=lambda it: voices[it.speaker_id])  # stable: the shuffled order breaks ties
        by_label[label].remove(best)
        taken[label] += 1
        voices[best.speaker_id] += 1
        chosen.append(best)
    return chosen


def samples_row(answer: Mapping[str, Any], item: Mapping[str, Any]) -> dict[str, Any]:
    """The harness samples row of one listener's answer to an MCQ item (scored as acc and ALA by its kind)."""
    vocab = mcq_vocabulary(item["options"])
    pred = vocab.parser.parse(answer["answer"])
    return {
        "benchmark_clip_id": answer["benchmark_clip_id"], "category": answer["config"], "kind": task_kind(answer["config"]).name,
        "task": answer["config"], "gold": answer["gold"], "pred": pred, "raw": answer["answer"],
        "parsed": pred is not None, "margin": None, "prompt": mcq_text(item["question"], item["options"]),
        "question": item["question"], "options": list(item["options"]), "adversarial": item["adversarial"],
        "answer_words": list(vocab.choices), "parser": vocab.parser.id, "source_clip_id": answer["source_clip_id"],
        "tier": answer["tier"], "curve": answer["curve"], "direction": answer["direction"],
    }  # fmt: skip


class BuilderRows:
    """A harness RowSource over items made by the item builder: the first `pool[config]` items of the split
    (what a study without a build drew from), rebuilt when a clip is first asked for."""

    def __init__(self, split: str, pool: Mapping[str, int]) -> None:
        self.split, self.pool = split, dict(pool)
        self.description = f"generate:{SOURCE_NAME}"
        self._rows: dict[str, dict[str, BenchRow]] = {}

    def _built(self, config: str) -> dict[str, BenchRow]:
        if config not in self._rows:
            from vocalgrad_dataset.voxparadox.export import config_items, item_row

            self._rows[config] = {item.id: built_item_row(item_row(item, config), config, config)
                                  for item in config_items(config, self.split, self.pool[config])}
        return self._rows[config]

    def units(self, config: str) -> list[SourceUnit]:
        """One unit per item (an item is its own source clip)."""
        return [SourceUnit(cid, float(r.get("duration_sec") or 0.0), (cid,)) for cid, r in self._built(config).items()]

    def rows(self, config: str, units: Sequence[SourceUnit]) -> Iterator[BenchRow]:
        built = self._built(config)
        for u in units:
            for cid in u.clip_ids:
                yield built[cid]
