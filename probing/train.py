"""Train and score every probe of an extraction directory: `python -m probing.train DIR`.

DIR holds `train/` and `test/` feature sets (from `python -m probing.extract`). Every (representation,
layer, config) probe is trained on train and scored on test, all of them batched together
(probing.probes.fit_jobs); direction alignment is computed per layer on the train split. Writes
DIR/probes/results.json, DIR/probes/weights.safetensors and DIR/probes/directions.json, prints a table,
and as its last line the JSON {"<representation>/<layer>": {"<config>": <test accuracy>}, ...}.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import logging
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from harness.results import atomic_write_bytes, atomic_write_text
from probing.directions import alignment, category_direction
from probing.probes import ProbeJob, ProbeSettings, fit_jobs, grouped_folds
from probing.store import Extraction, FeatureSet, StoreError
from vocalgrad_dataset.cli.argtypes import nonnegative_int, positive_int

log = logging.getLogger(__name__)

# Stage order of the pipeline: what a report lists first comes earliest in the model.
FAMILY_ORDER = ("mel", "encoder", "pre_llm", "late_llm", "text", "pos_a1", "pos_a2", "pos_a3", "pos_a4",
                "pos_attribute", "pos_query-2", "pos_query-1")
# Manifest fields that must agree between the train and test extraction of one config.
SAME_FIELDS = ("model", "revision", "adapter", "prompt_variant", "layers", "pooling", "mel")


def rep_sort_key(key: str) -> tuple[int, str, int]:
    """Sort "<family>/<layer>" keys by pipeline stage, then layer number."""
    family, _, layer = key.rpartition("/")
    rank = FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER)
    return (rank, family, int(layer) if layer.lstrip("-").isdigit() else 0)


def _check_pair(train: FeatureSet, test: FeatureSet) -> None:
    """Refuse to score a probe on features made by another model, adapter or prompt."""
    for f in SAME_FIELDS:
        a, b = train.manifest.get(f), test.manifest.get(f)
        if a != b:
            raise StoreError(f"{train.folder} and {test.folder} differ in {f!r} ({a!r} vs {b!r})")


def _selected(keys: Sequence[str], patterns: Sequence[str] | None) -> list[str]:
    keys = sorted(keys, key=rep_sort_key)
    if not patterns:
        return keys
    return [k for k in keys if any(fnmatch.fnmatch(k, p) for p in patterns)]


def _speaker_groups(test_rows: Any, k: int) -> tuple[list[str], str]:
    """CV groups: speakers when there are at least k of them, else source clips (named in the result)."""
    speakers = [s or c for s, c in zip(test_rows["speaker_id"], test_rows["source_clip_id"], strict=True)]
    if len(set(speakers)) >= k:
        return speakers, "speaker_id"
    log.warning("only %d speaker(s) in train: grouping CV folds by source clip instead", len(set(speakers)))
    return list(test_rows["source_clip_id"]), "source_clip_id"


def train_run(root: str | Path, settings: ProbeSettings | None = None, *, representations: Sequence[str] | None = None,
              cv_folds: int = 0, train_split: str = "train", test_split: str = "test",
              progress: bool = True) -> dict[str, Any]:
    """Train and score all probes of an extraction; writes DIR/probes/ and returns results.json's content."""
    settings = settings or ProbeSettings()
    ex = Extraction(root)
    train_configs, test_configs = ex.configs(train_split), ex.configs(test_split)
    configs = [c for c in train_configs if c in test_configs]
    if not configs:
        raise StoreError(f"{ex.root}: no config has both a {train_split}/ and a {test_split}/ extraction "
                         f"({train_split}: {train_configs or 'none'}, {test_split}: {test_configs or 'none'})")
    jobs: list[ProbeJob] = []
    meta: dict[str, Any] = {}
    sets: dict[str, tuple[FeatureSet, FeatureSet]] = {}
    for config in configs:
        tr, te = ex.open(train_split, config), ex.open(test_split, config)
        _check_pair(tr, te)
        sets[config] = (tr, te)
        meta[config] = {"n_train": len(tr.rows), "n_test": len(te.rows),
                        "complete": bool(tr.manifest.get("complete") and te.manifest.get("complete"))}
        keys = _selected([k for k in tr.representations if te.representations.get(k) == tr.representations[k]],
                         representations)
        y_tr, y_te = tr.rows.labels, te.rows.labels
        groups = congruence_groups(te.rows)
        for key in keys:
            # Lazy: a group's features are read only when that group trains.
            jobs.append(ProbeJob((key, config), _loader(tr, key), y_tr, _loader(te, key), y_te,
                                 dim=tr.representations[key], test_groups=groups))
        jobs += claim_jobs(tr, te, config, keys)
    if not jobs:
        raise StoreError(f"{ex.root}: no representation matches {list(representations or [])}")
    fitted = fit_jobs(jobs, settings, progress=progress)
    probes: dict[str, dict[str, Any]] = {}
    for (key, config), (_, metrics) in fitted.items():
        probes.setdefault(key, {})[config] = metrics
    probes = {k: probes[k] for k in sorted(probes, key=rep_sort_key)}
    first = sets[configs[0]][0].manifest
    out: dict[str, Any] = {
        "extraction": str(ex.root),
        "model": first.get("model"), "revision": first.get("revision"), "adapter": first.get("adapter"),
        "prompt_variant": first.get("prompt_variant"), "splits": {"train": train_split, "test": test_split},
        "settings": asdict(settings), "configs": meta, "probes": probes,
    }
    if cv_folds:
        out["cross_validation"] = _cross_validate(sets, probes, cv_folds, settings, progress)
    folder = ex.root / "probes"
    _save_weights(folder / "weights.safetensors", fitted)
    atomic_write_text(folder / "results.json", json.dumps(out, indent=1))
    directions = direction_alignment({c: s[0] for c, s in sets.items()}, list(probes))
    atomic_write_text(folder / "directions.json", json.dumps(directions, indent=1))
    return out


def _loader(fs: FeatureSet, key: str, rows: np.ndarray | None = None) -> Any:
    return (lambda: fs.load(key, np.float16)) if rows is None else (lambda: fs.load(key, np.float16)[rows])


CLAIM_TARGET = "claim"  # the probe target beside the direction: what the words of a conflict carrier claim


def congruence_groups(rows: Any) -> dict[str, np.ndarray] | None:
    """Row masks congruent / incongruent / neutral of a lexical-conflict extraction (None for other configs)."""
    claims = np.array(rows["claim"])
    if not np.isin(claims, ["increase", "decrease"]).any():
        return None
    congruent = np.array(rows["congruent"])
    return {"congruent": congruent == "True", "incongruent": congruent == "False", "neutral": claims == "none"}


def claim_jobs(tr: FeatureSet, te: FeatureSet, config: str, keys: Sequence[str]) -> list[ProbeJob]:
    """Probes for the words' claim (increase vs decrease; rows that claim something), keyed
    "<config>/claim": how far the claim of the transcript is readable at each layer."""
    masks = [np.flatnonzero(np.isin(np.array(fs.rows["claim"]), ["increase", "decrease"])) for fs in (tr, te)]
    if not all(len(m) for m in masks):
        return []
    ys = [(np.array(fs.rows["claim"])[m] == "increase").astype(np.int64) for fs, m in zip((tr, te), masks, strict=True)]
    return [ProbeJob((key, f"{config}/{CLAIM_TARGET}"), _loader(tr, key, masks[0]), ys[0], _loader(te, key, masks[1]),
                     ys[1], dim=tr.representations[key]) for key in keys]


def _cross_validate(sets: dict[str, tuple[FeatureSet, FeatureSet]], probes: dict[str, Any], k: int,
                    settings: ProbeSettings, progress: bool) -> dict[str, Any]:
    """Speaker-grouped k-fold CV on the train split: mean and sd of fold accuracy per probe."""
    jobs, how = [], {}
    for config, (tr, _) in sets.items():
        rows = tr.rows
        groups, how[config] = _speaker_groups(rows, k)
        folds = grouped_folds(groups, k)
        y = rows.labels
        for key in (p for p in probes if config in probes[p]):
            x = tr.load(key, np.float16)
            for f, held in enumerate(folds):
                keep = np.setdiff1d(np.arange(len(y)), held)
                jobs.append(ProbeJob((key, config, str(f)), x[keep], y[keep], x[held], y[held]))
    fitted = fit_jobs(jobs, settings, progress=progress)
    acc: dict[str, dict[str, list[float]]] = {}
    for (key, config, _), (_, m) in fitted.items():
        acc.setdefault(key, {}).setdefault(config, []).append(m["accuracy"])
    return {"folds": k, "group_by": how,
            "accuracy": {key: {c: {"mean": float(np.mean(v)), "sd": float(np.std(v))} for c, v in per.items()}
                         for key, per in acc.items()}}


def direction_alignment(train_sets: dict[str, FeatureSet], keys: Sequence[str]) -> dict[str, Any]:
    """Per representation/layer: cosine between category directions (needs >= 1 config; pairs need 2)."""
    out = {}
    for key in keys:
        vectors, n_sources = {}, {}
        for config, fs in train_sets.items():
            if key in fs.representations:
                vectors[config], n_sources[config] = category_direction(fs.load(key), fs.rows)
        out[key] = alignment(vectors, n_sources)
    return out


def _save_weights(path: Path, fitted: dict[tuple[str, ...], Any]) -> None:
    from safetensors.numpy import save

    tensors = {}
    for (key, config), (fit, _) in fitted.items():
        for field in ("weight", "bias", "mean", "scale"):
            tensors[f"{key}|{config}|{field}"] = np.ascontiguousarray(getattr(fit, field)[0], dtype=np.float32)
    atomic_write_bytes(path, save(tensors))


def accuracy_table(results: dict[str, Any]) -> str:
    """Plain-text test accuracy (%) per representation/layer (rows) and config (columns)."""
    probes = results["probes"]
    configs = list(results["configs"])
    width = max([len(k) for k in probes] + [14])
    lines = [f"{'probe':{width}s} " + " ".join(f"{c[:10]:>10s}" for c in configs)]
    for key, per in probes.items():
        cells = [f"{100 * per[c]['accuracy']:10.1f}" if c in per else f"{'—':>10s}" for c in configs]
        lines.append(f"{key:{width}s} " + " ".join(cells))
    return "\n".join(lines)


def summary_json(results: dict[str, Any]) -> str:
    """The contract line: {"<representation>/<layer>": {"<config>": test accuracy}}."""
    return json.dumps({k: {c: round(m["accuracy"], 6) for c, m in per.items()} for k, per in results["probes"].items()})


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `python -m probing.train`."""
    p = argparse.ArgumentParser(prog="python -m probing.train", description=__doc__.splitlines()[0])
    p.add_argument("dir", help="extraction directory holding train/ and test/")
    p.add_argument("--epochs", type=positive_int, default=200)
    p.add_argument("--batch-size", type=positive_int, default=512)
    p.add_argument("--seed", type=nonnegative_int, default=1234)
    p.add_argument("--device", default="auto", help="auto | cpu | cuda[:N]")
    p.add_argument("--representations", default=None,
                   help="comma-separated glob patterns over '<representation>/<layer>' (default: all)")
    p.add_argument("--cv", type=nonnegative_int, default=0, help="also run K-fold speaker-grouped CV on train (0: off)")
    p.add_argument("--train-split", default="train")
    p.add_argument("--test-split", default="test")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m probing.train`."""
    ns = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    settings = ProbeSettings(epochs=ns.epochs, batch_size=ns.batch_size, seed=ns.seed, device=ns.device)
    patterns = [p for p in re.split(r"\s*,\s*", ns.representations or "") if p] or None
    try:
        results = train_run(ns.dir, settings, representations=patterns, cv_folds=ns.cv,
                            train_split=ns.train_split, test_split=ns.test_split)
    except (StoreError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(accuracy_table(results))
    print(f"wrote {Path(ns.dir) / 'probes' / 'results.json'}")
    print(summary_json(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
