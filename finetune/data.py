"""Training rows straight from the generator: ids first (no audio), each row rendered when a step needs it.

The split, the toy subset and every epoch's order are functions of the clip ids and the seed alone, so
a resumed or differently sharded run sees exactly the same examples at the same optimizer step.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from harness.data import BenchRow, normalize_row, unit_key
from vocalgrad_dataset import grid
from vocalgrad_dataset.generate import config_ids, iter_config_rows, resolve_source
from vocalgrad_dataset.grid import Recipe
from vocalgrad_dataset.sources import get_source
from vocalgrad_dataset.tasks import config_spec, resolve

if TYPE_CHECKING:
    from finetune.settings import TrainSettings


def label_of(clip_id: str, recipe: Recipe | None = None) -> str:
    """The label a clip id has under a config's recipe (default: the main question's: "increase" for up,
    "decrease" for down; an unmodified source clip's id has its recipe's unchanged label)."""
    cond = grid.parse_any_clip_id(clip_id)[2]
    return recipe.label(cond) if recipe is not None else grid.parse_clip_id(clip_id)[2].label


@dataclass(frozen=True)
class Split:
    """Training and held-out validation ids, each in dataset order."""

    train: tuple[str, ...]
    val: tuple[str, ...]


def split_ids(ids: Sequence[str], *, val_fraction: float, seed: int, recipe: Recipe | None = None) -> Split:
    """Hold out round(val_fraction * n) clips of each label (SPEC §6: 10 %, stratified by label), drawn with seed;
    the labels are the config's recipe's (default: the main question's)."""
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    rng = np.random.default_rng(seed)
    held: set[str] = set()
    for label in recipe.labels if recipe else grid.LABELS:  # fixed order: the draw does not depend on set order
        members = [i for i in ids if label_of(i, recipe) == label]
        k = round(val_fraction * len(members))
        held.update(members[j] for j in rng.choice(len(members), size=k, replace=False))
    return Split(tuple(i for i in ids if i not in held), tuple(i for i in ids if i in held))


def balanced_subset(ids: Sequence[str], n: int, *, seed: int) -> tuple[str, ...]:
    """n ids (half of each label, drawn with seed) in dataset order: the toy sets of the tests."""
    if n < 2:
        raise ValueError(f"a training subset needs at least 2 clips (one per label), got {n}")
    rng = np.random.default_rng(seed)
    keep: set[str] = set()
    for k, label in enumerate(grid.LABELS):
        members = [i for i in ids if label_of(i) == label]
        want = n // 2 + (n % 2 if k == 1 else 0)
        if want > len(members):
            raise ValueError(f"asked for {want} {label!r} clips but the training split has {len(members)}")
        keep.update(members[j] for j in rng.choice(len(members), size=want, replace=False))
    return tuple(i for i in ids if i in keep)


def epoch_order(ids: Sequence[str], *, seed: int, epoch: int) -> list[str]:
    """The ids in the order epoch `epoch` visits them (a permutation drawn from (seed, epoch))."""
    perm = np.random.default_rng([seed, epoch]).permutation(len(ids))
    return [ids[i] for i in perm]


class RowRenderer:
    """Renders any single row of a config's split on demand from the generator's source clips (a category,
    or another generated config such as `volume-conflict`, whose rows carry the carrier's claim)."""

    def __init__(self, category: str, split: str, source: str | None = None, data_dir: str | Path | None = None,
                 *, cache_clips: int = 8) -> None:
        self.config = resolve(category)
        self.spec = config_spec(self.config)
        self.split, self.data_dir = split, data_dir
        self.source_name = resolve_source(self.config, source)
        self.cache_clips = cache_clips
        self._source: Any = None
        self._clips: dict[str, Any] | None = None
        self._pcm: OrderedDict[str, Any] = OrderedDict()

    def _index(self) -> dict[str, Any]:
        if self._clips is None:
            self._source = get_source(self.source_name, self.data_dir)
            self._clips = {unit_key(c.source_item_id, c.source_clip_id): c for c in self._source.clips(self.split)}
            if not self._clips:
                raise ValueError(f"source {self.source_name!r} has no {self.split} clips")
        return self._clips

    def ids(self) -> list[str]:
        """Every clip id of the split in dataset order (no audio decoded)."""
        self._index()  # one clear line when the source has no clips of the split
        return config_ids(self.config, self.split, self.source_name, self.data_dir)

    def row(self, clip_id: str) -> BenchRow:
        """The benchmark row of one clip id, rendered now (the source clip's PCM is cached, LRU)."""
        item, clip, _ = grid.parse_any_clip_id(clip_id)
        source_clip = self._index().get(unit_key(item, clip))
        if source_clip is None:
            raise ValueError(f"{clip_id}: no such source clip in the {self.split} split of {self.source_name!r}")
        key = unit_key(item, clip)
        pcm = self._pcm.pop(key, None)
        if pcm is None:
            pcm = self._source.read(source_clip)
        self._pcm[key] = pcm
        while len(self._pcm) > self.cache_clips:
            self._pcm.popitem(last=False)
        row = next(iter_config_rows(self.spec, source_clip, pcm.samples, pcm.sample_rate, ids={clip_id}), None)
        if row is None:
            raise ValueError(f"{clip_id}: not a clip of {self.config!r}")
        return normalize_row(row, self.config)

    def __getstate__(self) -> dict[str, Any]:
        # DataLoader workers rebuild the source lazily instead of pickling decoded audio.
        return {**self.__dict__, "_source": None, "_clips": None, "_pcm": OrderedDict()}


@dataclass(frozen=True)
class MicroBatch:
    """The clips one process feeds in one forward/backward of an optimizer step."""

    step: int  # 0-based optimizer step (over the whole run: a later stage's first step follows the last stage's)
    epoch: int  # within its stage
    ids: tuple[str, ...]
    weight: float  # 0.0: a stand-in so every process joins the step's gradient all-reduce
    last: bool  # the step's last micro-batch on this process: gradients are synchronised after it
    stage: int = 0  # which stage's data its ids are (StepRows renders them with that stage's renderer)


def plan_steps(train_ids: Sequence[str], *, seed: int, examples_per_step: int, micro_batch: int, rank: int,
               world_size: int, start_step: int, total_steps: int) -> list[MicroBatch]:
    """This process's micro-batches from start_step on: step s takes examples s*G..s*G+G-1 of its epoch's
    order (G = examples_per_step, the same on any number of processes), and process r every W-th of them."""
    per_epoch = steps_per_epoch(len(train_ids), examples_per_step)
    plan: list[MicroBatch] = []
    orders: dict[int, list[str]] = {}
    for step in range(start_step, total_steps):
        epoch, k = divmod(step, per_epoch)
        order = orders.setdefault(epoch, epoch_order(train_ids, seed=seed, epoch=epoch))
        step_ids = order[k * examples_per_step : (k + 1) * examples_per_step]
        mine, weight = step_ids[rank::world_size], 1.0
        if not mine:  # a short last step with fewer clips than processes
            mine, weight = step_ids[:1], 0.0
        chunks = [tuple(mine[i : i + micro_batch]) for i in range(0, len(mine), micro_batch)]
        plan += [MicroBatch(step, epoch, c, weight, i == len(chunks) - 1) for i, c in enumerate(chunks)]
    return plan


def steps_per_epoch(n_train: int, examples_per_step: int) -> int:
    """Optimizer steps in one pass over n_train clips (the last step may be short)."""
    return -(-n_train // examples_per_step)


@dataclass(frozen=True)
class StepCounts:
    """The optimizer steps of a run over n_train clips, examples_per_step clips each (the last of an epoch
    may be short)."""

    n_train: int
    examples_per_step: int
    per_epoch: int
    total: int  # over every epoch, or --max-steps when that is fewer

    @classmethod
    def of(cls, n_train: int, *, examples_per_step: int, epochs: int, max_steps: int | None) -> StepCounts:
        """The counts of `epochs` passes, stopped after max_steps steps when given."""
        per_epoch = steps_per_epoch(n_train, examples_per_step)
        total = per_epoch * epochs if max_steps is None else min(per_epoch * epochs, max_steps)
        return cls(n_train, examples_per_step, per_epoch, total)

    def clips(self, step: int) -> int:
        """How many clips optimizer step `step` takes over all processes (the loss is their mean)."""
        return min(self.examples_per_step, self.n_train - (step % self.per_epoch) * self.examples_per_step)


class Renderer(Protocol):
    """What training and validation read rows through: a config's rows by id (RowRenderer for the generator's
    configs, finetune.items.ItemRenderer for the multiple-choice items)."""

    config: str
    source_name: str

    def row(self, clip_id: str) -> BenchRow:
        """The row of one id, rendered now."""
        ...


@dataclass(frozen=True)
class TrainingData:
    """What a run trains and validates on: the renderer of the train split, its split, the training ids."""

    renderer: Renderer
    split: Split
    train_ids: tuple[str, ...]  # split.train, or a balanced --train-limit subset of it
    # a mixture (finetune.mixture): each config's own data, by config, and its weight
    parts: tuple[tuple[str, float, TrainingData], ...] = ()
    # the other data sets the run's stages read (e.g. DPO's), by their recipe name (DataDecl.describe)
    sets: dict[str, TrainingData] = field(default_factory=dict, compare=False)


def training_data(settings: TrainSettings, config: str | None = None) -> TrainingData:
    """A config's clips (default: the run's --category) from the generator's clip ids alone (no audio decoded
    yet). A multiple-choice item config's are built items instead: finetune.items.run_training_data chooses."""
    config = config or settings.category
    renderer = RowRenderer(config, "train", settings.source, settings.data_dir)
    split = split_ids(renderer.ids(), val_fraction=settings.val_fraction, seed=settings.seed,
                      recipe=renderer.spec.recipe)
    train_ids = split.train
    if settings.train_limit is not None:
        train_ids = balanced_subset(split.train, settings.train_limit, seed=settings.seed)
    if not train_ids:
        raise ValueError(f"no training clips for {config} from source {settings.source!r}")
    return TrainingData(renderer, split, train_ids)


class StepRows:
    """A map-style dataset over a plan: item i is micro-batch i's rows, rendered (and augmented) on demand by the
    renderer of its stage (one renderer: every stage's)."""

    def __init__(self, renderer: Renderer | Sequence[Renderer], plan: Sequence[MicroBatch],
                 augment: Callable[[BenchRow, int], BenchRow] | None = None) -> None:
        self.renderers = list(renderer) if isinstance(renderer, Sequence) else [renderer]
        self.plan, self.augment = list(plan), augment

    def __len__(self) -> int:
        return len(self.plan)

    def __getitem__(self, i: int) -> tuple[MicroBatch, list[BenchRow]]:
        mb = self.plan[i]
        renderer = self.renderers[mb.stage] if len(self.renderers) > 1 else self.renderers[0]
        rows = [renderer.row(cid) for cid in mb.ids]
        if self.augment is not None:
            rows = [self.augment(r, mb.epoch) for r in rows]
        return mb, rows
