"""Training rows of a foreign dataset mapped onto a task kind (`--dataset PATH_OR_REPO --kind K --columns
field=col,...`): the harness' own mapped source (harness.kinds: Kind.mapped_source, the parser `harness eval`
uses) read from the dataset's train split, one renderer per task, held out per item as finetune.items does.

Thin on purpose: the rows are the harness' (their kind asks them and names their answers), so training hears and
answers exactly what `harness eval --dataset ... --kind K --columns ...` scores.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from finetune.data import Split, TrainingData
from finetune.items import item_split
from harness.data import BenchRow

if TYPE_CHECKING:
    from finetune.settings import TrainSettings


@lru_cache(maxsize=4)
def mapped_source(dataset: str, split: str, kind: str, columns: str | None) -> Any:
    """The harness' mapped source of a dataset's split (read once per run: every task shares it)."""
    from harness.settings import RowSettings

    return RowSettings(split=split, dataset=dataset, kind=kind, columns=columns).mapped_rows()


class MappedRenderer:
    """The rows of one task of a mapped dataset, by id."""

    def __init__(self, source: Any, task: str, kind: str) -> None:
        source.config_names([task])  # "did you mean" for a task the dataset does not have
        self.source, self.config, self.kind = source, task, kind
        self.source_name = f"{kind}:{source.description.split(':', 1)[-1]}"
        self._units = {u.clip_ids[0]: u for u in source.units(task)}

    def ids(self) -> list[str]:
        return list(self._units)

    def row(self, item_id: str) -> BenchRow:
        unit = self._units.get(item_id)
        if unit is None:
            raise ValueError(f"{item_id}: not an item of task {self.config!r} of {self.source_name}")
        return next(iter(self.source.rows(self.config, [unit])))  # type: ignore[return-value]


def mapped_training_data(settings: TrainSettings, task: str) -> TrainingData:
    """One task's items of the mapped --dataset's train split: held out per item by sha256(seed, id) <
    val_fraction; --train-limit N keeps the first N training items."""
    source = mapped_source(str(settings.dataset), "train", str(settings.kind), settings.columns)
    renderer = MappedRenderer(source, task, str(settings.kind))
    split = item_split(renderer.ids(), val_fraction=settings.val_fraction, seed=settings.seed)
    train_ids = split.train[: settings.train_limit] if settings.train_limit is not None else split.train
    if not train_ids:
        raise ValueError(f"no training items for task {task!r} of {settings.dataset}")
    return TrainingData(renderer, Split(split.train, split.val), train_ids)
