"""Training data by declaration: several configs mixed by weight, and the data set of each recipe stage.

A mixture's ids are its configs' ids prefixed "<config>::" (the grid's clip ids repeat across categories), so
one MixedRenderer serves every row. Each config keeps its own split (held out as a single-config run holds it
out) and, with weight w, contributes round(w x its training ids) per epoch: the ids repeated floor(k / n) times
plus a seeded subset of the rest (w < 1: a seeded subset), all in dataset order; the epoch shuffle
(finetune.data.epoch_order) then mixes the configs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from finetune.data import Split, TrainingData
from finetune.items import run_training_data
from harness.data import BenchRow
from harness.settings import parse_configs
from vocalgrad_dataset.tasks import resolve

if TYPE_CHECKING:
    from finetune.recipe import DataDecl
    from finetune.settings import TrainSettings

SEP = "::"
VALIDATION = "validation"  # the --val-category set's key in TrainingData.sets


class MixedRenderer:
    """The rows of several configs' renderers, by "<config>::<id>"."""

    def __init__(self, parts: dict[str, TrainingData]) -> None:
        self.parts = {c: d.renderer for c, d in parts.items()}
        self.config = ",".join(parts)
        self.source_name = ",".join(sorted({r.source_name for r in self.parts.values()}))

    def row(self, clip_id: str) -> BenchRow:
        """The row of one prefixed id, rendered by its config's renderer."""
        config, sep, inner = clip_id.partition(SEP)
        if not sep or config not in self.parts:
            raise ValueError(f"{clip_id}: not an id of the mixture {self.config!r}")
        return self.parts[config].row(inner)


def weighted(ids: Sequence[str], weight: float, *, seed: int) -> tuple[str, ...]:
    """round(weight x n) of the ids: each repeated floor(k / n) times, plus a seeded subset of the remainder, in
    dataset order."""
    n = len(ids)
    k = max(1, round(weight * n)) if n else 0
    whole, rest = divmod(k, n) if n else (0, 0)
    keep = set(np.random.default_rng(seed).choice(n, size=rest, replace=False).tolist()) if rest else set()
    return tuple(i for j, i in enumerate(ids) for _ in range(whole + (j in keep)))


def _config_data(settings: TrainSettings, config: str) -> TrainingData:
    """One config's (or, with --kind, one task of the mapped --dataset's) training data."""
    if settings.kind:
        from finetune.mapped import mapped_training_data

        return mapped_training_data(settings, config)
    return run_training_data(settings, config)


def mixed_data(settings: TrainSettings, configs: Sequence[str], weights: Sequence[float]) -> TrainingData:
    """The training data of configs mixed by weights (one config at weight 1: that config's data itself)."""
    if not settings.kind:  # a mapped dataset's tasks are named by its own column
        configs = [resolve(c) for c in configs]  # as its rows name it (RowTasks answers each row by it)
    if len(configs) == 1 and weights[0] == 1.0:
        return _config_data(settings, configs[0])
    parts = {c: _config_data(settings, c) for c in configs}

    def prefixed(config: str, ids: Sequence[str]) -> tuple[str, ...]:
        return tuple(f"{config}{SEP}{i}" for i in ids)

    split = Split(tuple(i for c, d in parts.items() for i in prefixed(c, d.split.train)),
                  tuple(i for c, d in parts.items() for i in prefixed(c, d.split.val)))
    train_ids = tuple(i for k, (c, d) in enumerate(parts.items())
                      for i in weighted(prefixed(c, d.train_ids), weights[k], seed=settings.seed + k))
    return TrainingData(MixedRenderer(parts), split, train_ids,
                        tuple((c, float(w), parts[c]) for c, w in zip(configs, weights, strict=True)))


def decl_data(settings: TrainSettings, decl: DataDecl, train: TrainingData) -> TrainingData:
    """The data a stage declares: the run's training set, its DPO set (--dpo-category, else the training set),
    or configs of the stage's own."""
    if decl.use == "train" or (decl.use == "dpo" and not settings.dpo_category):
        return train
    if decl.use == "dpo":
        configs = settings.dpo_categories
        return mixed_data(settings, configs, [1.0] * len(configs))
    return mixed_data(settings, list(decl.configs), list(decl.weights))


def run_data(settings: TrainSettings) -> TrainingData:
    """The run's training set (--category, --mix-weights), with every other set its recipe's stages read in
    `sets` (by DataDecl.describe()), built now: a bad source fails before the model loads."""
    from dataclasses import replace

    from finetune.recipe import run_recipe

    configs = settings.categories
    train = mixed_data(settings, configs, settings.mix_weights or [1.0] * len(configs))
    sets = {}
    if settings.val_category:  # their held-out shares; of a training config, the very share training left out
        configs = parse_configs(settings.val_category)
        sets[VALIDATION] = mixed_data(settings, configs, [1.0] * len(configs))
    for stage in run_recipe(settings).stages:
        key = stage.data.describe()
        if key != "train" and key not in sets:
            sets[key] = decl_data(settings, stage.data, train)
    return replace(train, sets=sets)
