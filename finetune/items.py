"""Training rows of the multiple-choice configs built from items (VoxParadox-lite `voxparadox-<task>`).

Their items are not grid clips: each is made by our DSP from vendored base utterances
(vocalgrad_dataset.voxparadox.export.config_items, the same builder `vocalgrad-dataset build` runs), in a fixed
build order that is already a seeded shuffle of the task's combinations. The train split's items are built
once per run and kept as the rows a build writes (PCM16 WAV), so training hears what evaluation hears; with
frozen train ids (data/voxparadox/ids/<task>-train.txt) the full build is checked against them.

Validation holds out each item by a hash of (seed, id) with probability val_fraction, so the split of the
build's first n items is the first part of the full split, and `--train-limit N` (the first N training items
in build order) builds only a little more than N items instead of all of them.
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any

from finetune.data import Split, TrainingData, training_data
from harness.data import BenchRow, built_item_row
from vocalgrad_dataset.tasks import is_vocalgrad, resolve

if TYPE_CHECKING:
    from finetune.settings import TrainSettings

SOURCE_NAME = "voxparadox-lite"  # what a run's record names as its data source


class ItemRenderer:
    """The MCQ rows of one item config's split, built by the item builder (`load`), served by id."""

    def __init__(self, config: str, split: str = "train") -> None:
        self.config, self.split = resolve(config).name, split
        self.source_name = SOURCE_NAME
        self._rows: dict[str, dict[str, Any]] = {}
        self._order: list[str] = []

    def load(self, n: int | None = None) -> list[str]:
        """Build the split's first n items (None: the whole split, checked against its frozen ids when there
        are some); returns their ids in build order. Each is kept as the row a build writes (PCM16 WAV bytes)."""
        from vocalgrad_dataset.voxparadox.export import config_items, item_row

        self._rows = {item.id: item_row(item, self.config) for item in config_items(self.config, self.split, n)}
        self._order = list(self._rows)
        return list(self._order)

    def ids(self) -> list[str]:
        """The loaded items' ids in build order."""
        return list(self._order)

    def row(self, item_id: str) -> BenchRow:
        """The checked MCQ row of one loaded item, its audio decoded as the harness reads a build."""
        stored = self._rows.get(item_id)
        if stored is None:
            raise ValueError(f"{item_id}: not a built item of {self.config!r} {self.split}")
        return built_item_row(stored, self.config, self.config)


def held_out(item_id: str, *, val_fraction: float, seed: int) -> bool:
    """Whether an item is a validation item: a uniform draw from sha256(seed, id) below val_fraction."""
    digest = hashlib.sha256(f"{seed}:{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < val_fraction


def item_split(ids: list[str], *, val_fraction: float, seed: int) -> Split:
    """Training and validation items, each in build order (every id decided on its own, see module doc)."""
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    val = {i for i in ids if held_out(i, val_fraction=val_fraction, seed=seed)}
    return Split(tuple(i for i in ids if i not in val), tuple(i for i in ids if i in val))


def item_training_data(settings: TrainSettings, config: str | None = None) -> TrainingData:
    """A config's items (default: the run's --category): the whole train split, or (`--train-limit N`) the first N
    training items in build order with the validation items built among them."""
    config = config or settings.category
    renderer = ItemRenderer(config, "train")
    limit = settings.train_limit
    if limit is None:
        split = item_split(renderer.load(), val_fraction=settings.val_fraction, seed=settings.seed)
        train_ids = split.train
    else:
        if limit < 1:
            raise ValueError(f"train-limit must be >= 1, got {limit}")
        want = math.ceil(limit / (1.0 - settings.val_fraction)) + 2
        while True:  # the hash draw may hold out more than its share: build more until N training items
            split = item_split(renderer.load(want), val_fraction=settings.val_fraction, seed=settings.seed)
            if len(split.train) >= limit:
                break
            want *= 2
        cut = split.train[limit - 1]
        ids = renderer.ids()
        built = set(ids[: ids.index(cut) + 1])  # the items up to the N-th training item: its share of validation
        split = Split(split.train[:limit], tuple(i for i in split.val if i in built))
        train_ids = split.train
    if not train_ids:
        raise ValueError(f"no training items for {config}")
    return TrainingData(renderer, split, train_ids)


def run_training_data(settings: TrainSettings, config: str | None = None) -> TrainingData:
    """One config's training data (default: the run's single --category): the built items of a multiple-choice
    item config, else the generator's clips. A run's whole data (mixtures, DPO's set): finetune.mixture.run_data."""
    config = config or settings.category
    return training_data(settings, config) if is_vocalgrad(config) else item_training_data(settings, config)
