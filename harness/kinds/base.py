"""The Kind: everything one kind of task does, held as data beside pure functions (like a Category).

A kind says, in one place, what its rows carry and how a foreign dataset's columns map onto them, what is
asked and which answers are read, how one config is scored and how its group is aggregated (with the
lm-eval metric names), what the report and the leaderboard show of it, which answer DPO rejects, which word
a probe reads, and how the listening app presents an item. Every consumer asks the kind (from a config's
declaration, or `results["configs"][c]["kind"]` of a finished run); nothing outside `harness/kinds/`
compares a kind's name.

To add a kind, override what differs (see `Kind`'s fields; everything has a working default) in one module
that calls `register_kind`, and declare its configs in YAML (`kind: <name>`); a package outside this
repository registers its module under the `vocalgrad.kinds` entry point (docs/adding-a-kind.md).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.metrics import summarize
from harness.parsing import Vocabulary

Rows = Sequence[Mapping[str, Any]]
# The benchmark-row fields every VocalGrad (grid) kind reads (harness.data.BenchRow) and copies into samples.
GRID_ROW_FIELDS: tuple[str, ...] = ("audio", "benchmark_clip_id", "category", "attribute", "label", "tier", "curve",
                                    "direction", "source_clip_id")
GRID_SAMPLE_FIELDS: tuple[str, ...] = ("tier", "curve", "direction", "source_clip_id")
GRID_GROUP = "vocalgrad"  # results.json's group of the nine categories' mean
REVERSED = "-reversed"  # a time-reversed control's config suffix: its own group, never averaged with forward ones


@dataclass(frozen=True)
class Board:
    """A kind's unranked leaderboard section: its heading, a note and results.json group metrics -> columns."""

    title: str
    note: str
    fields: tuple[tuple[str, str], ...]  # (group metric, column heading), shown in %


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one registered object per kind
class Kind:
    """One kind of task. Override (by passing) what differs; the defaults are the VocalGrad direction task's.

    rows: `row_fields`, `sample_fields`, `grid` (rows of the 24-condition grid: tier / curve / direction
    breakdowns, the nine-category tables), `own_units` (an item is its own shard unit), `columns` and
    `mapped_source` (a foreign dataset mapped by `--kind K --columns field=col,...`).
    question: `vocabulary` (fixed answer words: the question is the config's declared one), or `prompt` (per row),
    `variants` (the prompt variants it accepts), `parser_id`.
    scoring: `metrics`, `group`, `group_metrics`, `lm_eval_metrics`, `headline` (the group's headline metric).
    views: `section` (report Markdown of its configs), `compare` (one line per run in a comparison),
    `board` (leaderboard section), `answers` (DPO's chosen and rejected options), `probe_word`, `buttons`
    (the listening app's answer buttons), `confusion` (a confusion-matrix figure per config).
    """

    name: str
    description: str
    row_fields: tuple[str, ...] = GRID_ROW_FIELDS
    sample_fields: tuple[str, ...] = GRID_SAMPLE_FIELDS
    grid: bool = True
    own_units: bool = False
    vocabulary: Vocabulary | None = None
    variants: tuple[str, ...] | None = None
    prompt: Callable[[Mapping[str, Any], Any], tuple[Any, Vocabulary]] | None = None
    parser_id: str | None = None
    metrics: Callable[[Rows], dict[str, Any]] = summarize
    group: str = GRID_GROUP
    group_metrics: Callable[[Mapping[str, Rows]], dict[str, Any]] | None = None
    lm_eval_metrics: Mapping[str, bool | None] = field(default_factory=dict)
    headline: tuple[str, str] | None = None  # (group metric, words) for one-line summaries
    config_metric: str = "accuracy"  # the number a config shows in a comparison table
    # (its configs' summaries, its group's summary) -> Markdown lines of the run's report
    section: Callable[[Mapping[str, Mapping[str, Any]], Mapping[str, Any]], list[str]] | None = None
    # [(run label, its configs' summaries, its group's summary)] -> Markdown lines of a comparison
    compare: Callable[[Sequence[tuple[str, Mapping[str, Mapping[str, Any]], Mapping[str, Any]]]], list[str]] | None = None
    board: Board | None = None
    answers: Callable[[Mapping[str, Any], Vocabulary | None], Any] | None = None
    probe_word: Callable[[Mapping[str, Any]], str | None] | None = None
    buttons: Callable[[Mapping[str, Any]], list[dict[str, str]]] | None = None  # {"label", "text"} per button
    columns: tuple[tuple[str, ...], tuple[str, ...]] | None = None  # (required, optional) mapped fields
    mapped_source: Callable[..., Any] | None = None  # (dataset, split, columns, *, hub_config=, where=)
    claims: bool = False  # rows carry a claim the words make (lexical conflict): DPO may reject it
    confusion: bool = False  # the report draws a confusion matrix over each config's label set

    def accepts(self, variant: str, config: str) -> None:
        """Refuse a prompt variant the kind does not take (a fixed question)."""
        if self.variants is not None and variant not in self.variants:
            raise ValueError(f"config {config!r} fixes its question (SPEC §4): use prompt "
                             f"{' or '.join(self.variants)}, not {variant!r}")

    @property
    def fixed_question(self) -> bool:
        """True when the kind's question and answers do not depend on the prompt variant."""
        return self.vocabulary is not None

    @property
    def per_row(self) -> bool:
        """True when each row carries its own question and answer options (multiple choice)."""
        return self.prompt is not None


def config_group(kind: Kind, config: str) -> str:
    """The results.json group a config of `kind` is averaged in: the kind's, or "<group>-reversed" for a
    time-reversed control (VoxParadox's `-reversed` configs)."""
    return f"{kind.group}{REVERSED}" if str(config).endswith(REVERSED) else kind.group


KINDS: dict[str, Kind] = {}


def register_kind(kind: Kind) -> Kind:
    """Add a kind to the registry (a second kind of the same name is an error); returns it."""
    if kind.name in KINDS and KINDS[kind.name] is not kind:
        raise ValueError(f"task kind {kind.name!r} is registered twice")
    KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> Kind:
    """A kind by name (installed plugin kinds included), with "did you mean"."""
    if name not in KINDS:
        load_plugin_kinds()
    if name in KINDS:
        return KINDS[name]
    close = difflib.get_close_matches(name, list(KINDS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown task kind {name!r}{hint} (kinds: {', '.join(KINDS)})")


@functools.cache  # scanning the installed packages' entry points costs milliseconds: once per process
def load_plugin_kinds() -> None:
    """Import every installed `vocalgrad.kinds` entry point (a module, or a Kind, that registers itself)."""
    from vocalgrad_dataset.plugins import entry_point_objects

    for _name, obj in entry_point_objects("vocalgrad.kinds"):
        if isinstance(obj, Kind):
            register_kind(obj)


@dataclass(frozen=True)
class AnswerOptions:
    """A row's true answer, its wrong options and (where the words claim one) the option the transcript claims:
    what DPO's chosen and rejected answers are drawn from (finetune.objective)."""

    answer: str
    wrong: tuple[str, ...]
    claim: str | None = None


def word_answers(row: Mapping[str, Any], vocabulary: Vocabulary | None) -> AnswerOptions:
    """A grid row's answers: its own `options`/`answer` where it carries them (a claim among the wrong ones is
    the claimed option), else its label's word in the config's vocabulary against the other words."""
    where = row.get("benchmark_clip_id", "?")
    if row.get("options"):
        options, answer = tuple(row["options"]), row.get("answer")
        if answer not in options:
            raise ValueError(f"{where}: answer {answer!r} is not one of its options {list(options)}")
        wrong = tuple(o for o in options if o != answer)
        return AnswerOptions(answer, wrong, row.get("claim") if row.get("claim") in wrong else None)
    if vocabulary is None:
        raise ValueError(f"{where}: a row without options needs its config's vocabulary")
    if row["label"] not in vocabulary.labels:
        raise ValueError(f"{where}: label {row['label']!r} is not one of {list(vocabulary.labels)}")
    answer = vocabulary.words[vocabulary.labels.index(row["label"])]
    return AnswerOptions(answer, tuple(w for w in vocabulary.words if w != answer))
