"""Task kinds: one module per kind, each registering a `Kind` (base.py) beside its pure functions.

A config's YAML declaration names its kind (`kind: ternary`); a finished run records it per config
(`results["configs"][c]["kind"]`). Consumers look the kind up here and ask it; they never compare its name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.kinds import choice, conflict, direction, ternary, yesno  # noqa: F401 - each registers its kind
from harness.kinds.base import (
    GRID_GROUP,
    GRID_ROW_FIELDS,
    GRID_SAMPLE_FIELDS,
    KINDS,
    AnswerOptions,
    Board,
    Kind,
    get_kind,
    load_plugin_kinds,
    register_kind,
)

__all__ = ["GRID_GROUP", "GRID_ROW_FIELDS", "GRID_SAMPLE_FIELDS", "KINDS", "AnswerOptions", "Board", "Kind",
           "get_kind", "load_plugin_kinds", "register_kind"]  # re-exported from base.py


def task_kind(config: str) -> Kind:
    """The kind of a declared config (its YAML `kind`)."""
    from vocalgrad_dataset.tasks import resolve

    decl = resolve(config).decl
    try:
        return get_kind(decl.kind)
    except ValueError as err:
        raise ValueError(f"{decl.file}: kind: {err}") from None


def row_kind(row: Mapping[str, Any]) -> Kind:
    """The kind of a benchmark or samples row: the kind it carries (item rows), else its config's."""
    return get_kind(str(row["kind"])) if row.get("kind") else task_kind(str(row["category"]))


def source_kind(source: Any, config: str) -> Kind:
    """A config's kind as its row source knows it (a mapped dataset: the kind it was mapped as), else its
    declaration's."""
    kind = getattr(source, "kind", None)
    return kind if isinstance(kind, Kind) else task_kind(config)


def rows_kind(config: str, rows: Sequence[Mapping[str, Any]]) -> Kind:
    """The kind of a config's samples rows (a config named after a mapped task is not declared)."""
    return row_kind(rows[0]) if rows else task_kind(config)


def result_kind(results: Mapping[str, Any], config: str) -> Kind:
    """The kind a finished run recorded for a config (older runs: the config's declaration)."""
    name = ((results.get("configs") or {}).get(config) or {}).get("kind")
    return get_kind(str(name)) if name else task_kind(config)


def configs_by_kind(results: Mapping[str, Any], configs: Sequence[str]) -> dict[Kind, list[str]]:
    """The run's configs grouped by their recorded kind, in registry order of the kinds."""
    groups: dict[str, list[str]] = {}
    for c in configs:
        groups.setdefault(result_kind(results, c).name, []).append(c)
    return {KINDS[name]: groups[name] for name in KINDS if name in groups}


def all_kinds() -> list[Kind]:
    """Every registered kind, installed plugin kinds included, in registry order."""
    load_plugin_kinds()
    return list(KINDS.values())
