"""What a suite declares, as plain data: its runs, its tables and the suite itself.

Kept apart from the loader (suite.py) and the table builders (tables.py) so that both, and the samples
reader (inputs.py), depend on these types without depending on each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# Tasks of a --kind classify dataset (Table 22's MELD), not generated configs: a run of only these is
# *external*: made with `harness eval --kind classify` (per adapter), never by vocalgrad-paper itself.
EXTERNAL_CONFIGS: tuple[str, ...] = ("meld",)


@dataclass(frozen=True)
class SuiteRun:
    """One evaluation of the suite: a prompt variant over a set of configs from one source."""

    name: str  # also the key of the published values; the directory replaces ":" with "-"
    prompt: str
    configs: tuple[str, ...]
    group: str  # what --only / --skip select besides the name
    tables: tuple[str, ...] = ()  # keys of the tables that read this run, in table order
    source: str | None = None  # None: the suite's --source / --dataset
    audios_per_query: int = 1
    # the category of the LoRA adapter this run evaluates (Table 4, Figure 4): an external run, made with
    # `vocalgrad-finetune` and `harness eval --adapter`, never by vocalgrad-paper itself
    trained: str | None = None

    @property
    def dirname(self) -> str:
        return self.name.replace(":", "-")

    @property
    def external(self) -> bool:
        """True for a run of external tasks only (MELD) or of a fine-tuned adapter: its samples come from
        `harness eval`, not the suite."""
        return self.trained is not None or (bool(self.configs) and all(c in EXTERNAL_CONFIGS for c in self.configs))


@dataclass(frozen=True)
class SuiteTable:
    """One output file: its key, file name, title, kind (builder), the runs it reads and how it labels them."""

    key: str  # "2", "3", ..., "figure8"
    filename: str
    title: str
    kind: str  # a name in harness.paper.tables.TABLE_KINDS
    runs: tuple[str, ...] = ()  # run names, groups expanded
    labels: Mapping[str, str] = field(default_factory=dict)  # run name -> row label
    note: str = ""  # text above the table
    heading: str = ""  # "" : "Table <key>"

    @property
    def head(self) -> str:
        """The heading's prefix: "Table 2", or the declared heading ("Figure 8")."""
        return self.heading or f"Table {self.key}"


@dataclass(frozen=True)
class Suite:
    """Runs in execution order and tables in file order, as declared (see load_suite)."""

    path: str
    runs: tuple[SuiteRun, ...]
    tables: tuple[SuiteTable, ...]

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.group for r in self.runs))

    @property
    def by_name(self) -> dict[str, SuiteRun]:
        return {r.name: r for r in self.runs}

    def select(self, only: Sequence[str] = (), skip: Sequence[str] = ()) -> list[SuiteRun]:
        """Runs whose name or group is in `only` (all when empty) and in neither of `skip`."""
        known = {r.name for r in self.runs} | set(self.groups)
        for name in [*only, *skip]:
            if name not in known:
                raise ValueError(f"unknown run or group {name!r}; groups: {', '.join(self.groups)}")
        chosen = [r for r in self.runs if not only or r.name in only or r.group in only]
        return [r for r in chosen if r.name not in skip and r.group not in skip]
