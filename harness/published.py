"""Published multiple-choice benchmarks (the VoxParadox release, MMSU, MMAU, MMAR) run as declared configs.

A declaration of family `published` (vocalgrad_dataset/data/tasks/<benchmark>.yaml) names, under `params`, the
Hub dataset id (`hub`, with an optional Hub configuration `hub_config`) and `split`, the column map
(`columns`: the `--columns` fields; `options: choice_a+choice_b+...` joins option columns), a row filter
(`where`: column -> accepted values, compared case-insensitively), the columns whose breakdown results.json
and the report show (`columns.groups`), and the benchmark's own answer instruction where it publishes one
(`instruction`: the prompt's last line instead of ours; none is declared until its text is checked against
the benchmark's published code). `harness eval --configs voxparadox` reads the Hub copy;
`--dataset PATH` reads a local copy instead (a folder of Parquet or JSON Lines / JSON / CSV files, or one such
file; a JSON array such as MMAR-meta.json with audio paths relative to it). The run's configs are the
benchmark's tasks (its task column), scored as any multiple-choice run: GT accuracy, ALA and Δ per task with
intervals, and their macro mean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.mcq_source import MappedMCQSource

FAMILY = "published"  # the declarations' family: a published benchmark read through its column map
PARAMS = ("hub", "hub_config", "split", "columns", "where", "instruction", "release", "notes")


def published_config(name: str) -> Any:
    """The resolved declaration of a published benchmark named `name`, else None (any other name, declared or not)."""
    from vocalgrad_dataset.tasks import resolve

    try:
        config = resolve(name)
    except ValueError:
        return None  # a mapped dataset's own task name
    return config if config.family == FAMILY else None


def published_source(configs: Sequence[str], dataset: str | None, split: str | None) -> PublishedSource | None:
    """The source of a run whose --configs name a published benchmark (None when none does); one benchmark a run."""
    found = [c for c in map(published_config, map(str, configs)) if c is not None]
    if not found:
        return None
    if len(found) != len(configs) or len({str(c) for c in found}) > 1:
        raise ValueError(f"--configs {','.join(map(str, configs))}: a published benchmark "
                         f"({', '.join(sorted({str(c) for c in found}))}) runs alone; give one per run")
    return PublishedSource(found[0], dataset, split)


def check_params(config: Any) -> Mapping[str, Any]:
    """A published declaration's params, checked (one line naming its file and the field)."""
    params, file = config.params, config.decl.file
    unknown = [k for k in params if k not in PARAMS]
    if unknown:
        raise ValueError(f"{file}: params: unknown field {unknown[0]!r} (fields: {', '.join(PARAMS)})")
    for name in ("hub", "split"):
        if not isinstance(params.get(name), str) or not params[name]:
            raise ValueError(f"{file}: params: {name}: expected text, got {params.get(name)!r}")
    if not isinstance(params.get("columns"), dict) or not isinstance(params.get("where", {}), dict):
        raise ValueError(f"{file}: params: columns and where must be mappings")
    return params


class PublishedSource(MappedMCQSource):
    """A published benchmark's items through its declared column map (module docstring)."""

    def __init__(self, config: Any, dataset: str | None, split: str | None) -> None:
        from harness.kinds import task_kind
        from harness.mcq_source import OPTIONAL, REQUIRED, parse_column_map

        params = check_params(config)
        text = ",".join(f"{k}={v}" for k, v in params["columns"].items())
        columns = parse_column_map(text, f"{config.decl.file}: params: columns", REQUIRED, OPTIONAL)
        self.benchmark = str(config)
        self.instruction = params.get("instruction")  # the benchmark's own answer instruction, where declared
        super().__init__(dataset or params["hub"], split or params["split"], columns, kind=task_kind(config),
                         hub_config=params.get("hub_config"), where=params.get("where"))
        self.description = f"{self.benchmark}:{dataset or params['hub']} ({self.split})"

    def _item(self, where: str, index: int, row: Mapping[str, Any]) -> dict[str, Any]:
        """One item, with the declared answer instruction (the prompt's last line) when there is one."""
        item = super()._item(where, index, row)
        return {**item, "instruction": self.instruction} if self.instruction else item

    def config_names(self, names: Sequence[str] | None) -> list[str]:
        """The benchmark's name stands for every task it has (its task column)."""
        rest = [n for n in names or () if n != self.benchmark]
        return super().config_names(rest or None)

