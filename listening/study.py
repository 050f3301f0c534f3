"""A study: its configs and sampled items, the questions and answer buttons, and the audio it plays."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from harness.kinds import task_kind
from harness.prompts import get_variant
from listening.items import (
    SOURCE_NAME,
    BuilderRows,
    balanced_items,
    builder_pool,
    built_pool,
    pool_size,
)
from listening.sampler import SAMPLER_VERSION, PoolClip, SampleItem, balanced_sample, candidate_pool
from listening.store import Store
from vocalgrad_dataset import grid
from vocalgrad_dataset.fileio import atomic_write_bytes
from vocalgrad_dataset.generate import resolve_source, wav_bytes
from vocalgrad_dataset.tasks import config_spec, expand_specs

PROMPT_VARIANT = "default"  # annotators read the main question (or the format's fixed one, SPEC §4)


def configs_of(names: str | Sequence[str]) -> list[str]:
    """Canonical config names from "volume,pitch", "all", "all-ternary" (expanded, duplicates dropped)."""
    parts = names.split(",") if isinstance(names, str) else list(names)
    out = [name for p in parts if p.strip() for name in _expanded(p.strip())]
    if not out:
        raise ValueError("no config given")
    return list(dict.fromkeys(out))


def _expanded(name: str) -> list[str]:
    """A config name (or family such as "all") as canonical config names; a multiple-choice config is itself."""
    from vocalgrad_dataset.tasks import declared_names, is_vocalgrad

    try:
        return [spec.name for spec in expand_specs(name)]
    except ValueError:
        if name not in declared_names() or is_vocalgrad(name):  # the generator's error names the mistake
            raise
        return [name]


def item_record(study: dict[str, Any], item: dict[str, Any]) -> dict[str, Any] | None:
    """A multiple-choice item's question, options and adversarial label (the study record holds them); None
    for an item of a direction config."""
    return (study.get("items") or {}).get(item["config"], {}).get(item["benchmark_clip_id"])


def item_view(study: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """What the page shows for an item: the question and the answer buttons (label stored, text shown)."""
    record = item_record(study, item)
    buttons = task_kind(item["config"]).buttons
    if record is not None and buttons is not None:  # an item's own options, as its kind presents them
        return {"config": item["config"], "question": record["question"], "options": buttons(record)}
    config = item["config"]
    return {"config": config, "question": question(config),
            "options": [{"label": lab, "text": word.capitalize()} for lab, word in answer_options(config)]}


def item_labels(study: dict[str, Any], item: dict[str, Any]) -> list[str]:
    """The answers an item takes: its options (multiple choice), else its config's labels."""
    return [o["label"] for o in item_view(study, item)["options"]]


def answer_options(config: str) -> list[tuple[str, str]]:
    """(label, answer word) per button: increase/decrease, + constant for ternary, yes/no for yes/no."""
    vocab = get_variant(PROMPT_VARIANT).vocabulary(config)
    return list(zip(vocab.labels, vocab.words, strict=True))


def question(config: str) -> str:
    """The question annotators read (the prompt's first sentence, without the one-word instruction)."""
    spec = config_spec(config)
    return spec.prompt().split("\n\n")[0]


PROTOCOL = {  # defaults of the study's protocol settings (stored in the study, shown by export)
    "headphone_trials": 6,  # Woods et al. (2017) antiphase screen, 6 trials, pass at 5 right (0: no screen)
    "catch_per_config": 4,  # catch trials per config: clear items with a known answer, scored apart
    "catch_threshold": 0.75,  # catch accuracy below this excludes the annotator from the scores
    "min_listen": 1.0,  # share of a clip's duration that must pass between serving it and an answer
    "min_annotators": 2,  # the design: complete, included annotators needed for an export that is not marked
}


def _picks(pool: Sequence[PoolClip], used: set[str], config: str, wanted: Sequence[grid.Condition | None],
           avoid: Sequence[SampleItem] = ()) -> list[SampleItem]:
    """One clip per wanted condition (None: an unmodified clip) among the unused ones, the closest match
    (same direction, high tier) from different speakers where possible."""
    spec = config_spec(config)
    free = [c for c in pool if c.benchmark_clip_id not in used] or list(pool)
    picks: list[PoolClip] = []
    speakers = {it.speaker_id for it in avoid}
    for cond in wanted:
        def rank(c: PoolClip, cond: grid.Condition | None = cond) -> tuple[Any, ...]:
            exact = cond is None and c.direction == grid.NO_CONDITION or cond is not None and (
                c.tier, c.curve, c.direction) == (cond.tier, cond.curve, cond.direction)
            same_dir = cond is not None and c.direction == cond.direction
            return (not exact, not same_dir, c.tier != "high",
                    c.speaker_id in speakers or any(p.speaker_id == c.speaker_id for p in picks), c.benchmark_clip_id)
        best = min((c for c in free if c not in picks), key=rank, default=None)
        if best is None:
            raise ValueError(f"{config}: the pool has too few clips for the training and catch items")
        picks.append(best)
    return [SampleItem(c.benchmark_clip_id, spec.name, c.tier, c.curve, c.direction, c.gold, c.source_item_id,
                       c.source_clip_id, c.speaker_id) for c in picks]


def _wanted(config: str, k: int) -> list[grid.Condition | None]:
    """k clear conditions alternating "up" and "down" (yes/no: a changed and an unmodified clip)."""
    # a recipe whose changed clips share one label (yes/no): its other answer is an unmodified clip
    down = None if config_spec(config).recipe.changed else grid.Condition("linear", "high", "down")
    return [grid.Condition("linear", "high", "up") if i % 2 == 0 else down for i in range(k)]


def training_picks(pool: Sequence[PoolClip], sample: Sequence[SampleItem], config: str) -> list[SampleItem]:
    """Two clearly audible examples outside the sample: high tier, linear, one "up" and one "down" (yes/no:
    one changed and one unmodified clip), from different speakers where possible."""
    return _picks(pool, {it.benchmark_clip_id for it in sample}, config, _wanted(config, 2))


def catch_picks(pool: Sequence[PoolClip], used: Sequence[SampleItem], config: str, k: int) -> list[SampleItem]:
    """k catch items outside the sample and the training examples: the clearest clips (high tier, linear),
    directions alternating, so a listener who attends cannot miss them."""
    return _picks(pool, {it.benchmark_clip_id for it in used}, config, _wanted(config, k))


def create_study(db: str | Path, configs: str | Sequence[str], n: int, seed: int = 0, *, split: str = "test",
                 source: str | None = None, data_dir: str | None = None, dataset: str | None = None,
                 **protocol: Any) -> Store:
    """Sample n items per config (plus two training examples and the catch items each) into a new study
    database; `protocol` overrides `PROTOCOL`'s settings."""
    unknown = sorted(set(protocol) - set(PROTOCOL))
    if unknown:
        raise ValueError(f"unknown protocol setting(s) {', '.join(unknown)}; known: {', '.join(PROTOCOL)}")
    settings = {**PROTOCOL, **protocol}
    names = configs_of(configs)
    mcq = [c for c in names if task_kind(c).per_row]
    if mcq:
        if len(mcq) != len(names):
            raise ValueError(f"multiple-choice configs ({', '.join(mcq)}) and direction configs go in separate "
                             "studies")
        if source is not None or data_dir is not None:
            raise ValueError(f"{', '.join(mcq)}: items come from a build (--dataset) or the item builder; "
                             "--source and --data-dir do not apply")
        return _create_mcq_study(db, names, n, seed, split, dataset, settings)
    for config in names:
        if not config_spec(config).recipe.augmented:  # gold "constant" is not among its two buttons
            base = config.removesuffix("-source")
            raise ValueError(f"{config} holds unmodified clips only and its question has no right answer among "
                             f"the buttons; a listening test uses {base}, {base}-yesno or {base}-ternary")
    items: list[SampleItem] = []
    training: list[SampleItem] = []
    catch: list[SampleItem] = []
    pool_sizes = {}
    for config in names:
        pool = candidate_pool(config, split, source, data_dir, dataset)
        sample = balanced_sample(pool, config, n, seed)
        items += sample
        picked = training_picks(pool, sample, config)
        training += picked
        catch += catch_picks(pool, [*sample, *picked], config, int(settings["catch_per_config"]))
        pool_sizes[config] = len(pool)
    sources = {resolve_source(c, source) for c in names}
    if dataset is None and len(sources) > 1:
        raise ValueError(f"configs {', '.join(names)} come from different sources ({', '.join(sorted(sources))}); "
                         "run one study per source")
    study = {
        "configs": names, "n": n, "seed": seed, "split": split, "sampler_version": SAMPLER_VERSION,
        "source": None if dataset else sources.pop(),
        "data_dir": str(Path(data_dir).resolve()) if data_dir else None,
        "dataset": str(Path(dataset).resolve()) if dataset else None,
        "pool_sizes": pool_sizes, "protocol": settings,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    return Store.create(db, study, items, training, catch)


def _create_mcq_study(db: str | Path, names: Sequence[str], n: int, seed: int, split: str, dataset: str | None,
                      settings: dict[str, Any]) -> Store:
    """A study of multiple-choice configs: per config n items balanced over the true label, two training
    examples and the catch trials, all distinct, from the build or the item builder (listening.items)."""
    items: list[SampleItem] = []
    training: list[SampleItem] = []
    catch: list[SampleItem] = []
    records: dict[str, dict[str, Any]] = {}
    pool_sizes, built = {}, {}
    k_catch = int(settings["catch_per_config"])
    for config in names:
        if dataset is not None:
            pool = built_pool(config, split, dataset)
        else:
            built[config] = pool_size(n, k_catch)
            pool = builder_pool(config, split, built[config])
        sample = balanced_items(pool, config, n, seed)
        used = [it.benchmark_clip_id for it in sample]
        picked = balanced_items(pool, config, 2, seed, avoid=used)  # two examples with different true labels
        used += [it.benchmark_clip_id for it in picked]
        caught = balanced_items(pool, config, k_catch, seed, avoid=used) if k_catch else []
        records[config] = {it.benchmark_clip_id: it.record() for it in [*sample, *picked, *caught]}
        items += [it.sample_item() for it in sample]
        training += [it.sample_item() for it in picked]
        catch += [it.sample_item() for it in caught]
        pool_sizes[config] = len(pool)
    study = {
        "configs": list(names), "n": n, "seed": seed, "split": split, "sampler_version": SAMPLER_VERSION,
        "source": None if dataset else SOURCE_NAME, "data_dir": None,
        "dataset": str(Path(dataset).resolve()) if dataset else None, "kind": task_kind(names[0]).name,
        "pool_sizes": pool_sizes, "item_pool": built, "items": records, "protocol": settings,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }  # fmt: skip
    return Store.create(db, study, items, training, catch)


def source_description(study: dict[str, Any]) -> str:
    """Where the audio came from, in the harness's words ("generate:demo", "parquet:/path")."""
    if study.get("dataset"):
        from harness.data import open_source

        return open_source(study["split"], dataset=study["dataset"]).description
    return f"generate:{study.get('source') or 'vctk'}"


class AudioProvider:
    """WAV bytes of a study's clips: rendered by the generator (or read from the build) on first request,
    then served from a cache folder beside the database."""

    def __init__(self, store: Store, cache_dir: str | Path | None = None) -> None:
        from harness.data import open_source

        s = store.study
        self.store = store
        self.cache_dir = Path(cache_dir) if cache_dir else store.path.with_name(store.path.name + ".audio")
        if s.get("source") == SOURCE_NAME:  # multiple-choice items from the item builder, as the study drew them
            self.rows: Any = BuilderRows(s["split"], s["item_pool"])
        else:
            self.rows = open_source(s["split"], s.get("source") or "vctk", s.get("data_dir"), s.get("dataset"))
        self._units: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()  # one render at a time: bounded CPU, no duplicate work

    def _path(self, config: str, clip_id: str) -> Path:
        key = hashlib.sha256(f"{config}:{clip_id}".encode()).hexdigest()[:24]
        return self.cache_dir / f"{key}.wav"

    def wav(self, config: str, clip_id: str) -> bytes:
        """The clip as PCM16 WAV (file names and URLs never carry the clip id, which names the direction)."""
        path = self._path(config, clip_id)
        if path.is_file():
            return path.read_bytes()
        with self._lock:
            if path.is_file():
                return path.read_bytes()
            from harness.data import SourceUnit

            if config not in self._units:
                self._units[config] = {cid: u for u in self.rows.units(config) for cid in u.clip_ids}
            unit = self._units[config].get(clip_id)
            if unit is None:
                raise KeyError(f"{config}: clip {clip_id} is not in the study's data")
            row = next(iter(self.rows.rows(config, [SourceUnit(unit.key, unit.duration_sec, (clip_id,))])))
            audio = row["audio"]
            pcm = np.clip(np.round(np.asarray(audio["array"], np.float64) * 32768.0), -32768, 32767).astype(np.int16)
            data = wav_bytes(pcm, int(audio["sampling_rate"]))
            atomic_write_bytes(path, data)
            return data

    def warm(self, stop: threading.Event | None = None) -> None:
        """Render every clip of the study ahead of time (run in a background thread)."""
        for it in self.store.items("training") + self.store.items("test"):
            if stop is not None and stop.is_set():
                return
            self.wav(it["config"], it["benchmark_clip_id"])
