"""Python entry points through which other installed packages add models, sources and categories.

A package declares, in its pyproject.toml::

    [project.entry-points."vocalgrad.categories"]
    tremolo = "my_pkg.tremolo:CATEGORY"          # a vocalgrad_dataset.categories.Category
    [project.entry-points."vocalgrad.sources"]
    my-corpus = "my_pkg.corpus:MyCorpusSource"   # a source factory, like --source package.module:Factory
    [project.entry-points."vocalgrad.models"]
    my-model = "my_pkg.model:ENTRY"              # a harness.models.registry.ModelEntry (or a list of them)

and after `pip install my_pkg` the names work everywhere (`--config tremolo`, `--source my-corpus`,
`--model my-model`). Loading is lazy: nothing is imported until a registry is first asked.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

GROUPS = ("vocalgrad.models", "vocalgrad.sources", "vocalgrad.categories")


class PluginError(ValueError):
    """An installed package's entry point could not be loaded (names the entry point and its package)."""


def entry_point_objects(group: str) -> list[tuple[str, Any]]:
    """(entry-point name, loaded object) for every installed entry point of `group`, sorted by name."""
    out = []
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            out.append((ep.name, ep.load()))
        except Exception as err:  # a broken plugin must say which one it is
            package = ep.dist.name if ep.dist is not None else "?"
            raise PluginError(f"entry point {ep.name!r} of {group} ({ep.value}, package {package}) failed to "
                              f"load: {type(err).__name__}: {err}") from err
    return out
