"""Task kinds: what a config's rows carry, what is asked, how answers are read and scored, which metrics.

A config is declared as data (vocalgrad_dataset/data/tasks/*.yaml, see vocalgrad_dataset.tasks); its `kind`
names one entry of KINDS here. A kind holds, in one place: the row fields it reads, the row fields copied
into every samples row, its fixed question and answer vocabulary (None: the prompt variant decides, as for
the main direction question), the prompt variants it accepts, its metric set and the results.json group
its configs are macro-averaged in.

Adding a kind (e.g. `conflict`): write a TaskKind below and register it with `register_kind`, then declare
its configs as YAML files with `kind: <name>`; the runner, results and reports read everything else from
the kind. Adding a config of an existing kind is only the YAML file.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.classification import (
    CLASSIFY_LM_EVAL,
    classification_macro,
    classification_summary,
    classify_prompt,
)
from harness.mcq import MCQ_FIELDS, mcq_prompt
from harness.metrics import (
    CONFLICT_METRICS,
    conflict_macro,
    conflict_summary,
    mcq_macro,
    mcq_summary,
    summarize,
)
from harness.parsing import TERNARY_VOCABULARY, YESNO_VOCABULARY, Vocabulary, mcq_parser_id
from vocalgrad_dataset.prompt import ternary_prompt, yesno_prompt
from vocalgrad_dataset.tasks import task_config

Rows = Sequence[Mapping[str, Any]]
# The benchmark-row fields every VocalGrad kind reads (harness.data.BenchRow) and copies into samples rows.
GRID_ROW_FIELDS: tuple[str, ...] = ("audio", "benchmark_clip_id", "category", "attribute", "label", "tier", "curve",
                                    "direction", "source_clip_id")
GRID_SAMPLE_FIELDS: tuple[str, ...] = ("tier", "curve", "direction", "source_clip_id")
CLAIM_FIELDS: tuple[str, ...] = ("claim", "congruent")  # lexical-conflict rows: what the words claim, and agree?


@dataclass(frozen=True)
class TaskKind:
    """One kind of task (module docstring): rows, question, answers, scoring options and metrics."""

    name: str
    description: str
    row_fields: tuple[str, ...]  # what a row of this kind must carry
    sample_fields: tuple[str, ...]  # row fields copied into every samples row (breakdowns, clustering)
    vocabulary: Vocabulary | None = None  # fixed answer words and parser; None: the prompt variant's
    question: Callable[[str], str] | None = None  # fixed question from the attribute word; None: the variant's
    variants: tuple[str, ...] | None = None  # prompt variants it accepts (None: every variant)
    metrics: Callable[[Rows], dict[str, Any]] = summarize  # one config's summary
    group: str = "vocalgrad"  # results.json group its configs are macro-averaged in
    group_metrics: Callable[[Mapping[str, Rows]], dict[str, Any]] | None = None  # None: the VocalGrad mean
    # its own "<metric>,none" keys beside the shared ones: metric -> higher is better (None: neither)
    lm_eval_metrics: Mapping[str, bool | None] = field(default_factory=dict)
    # row-level question and answers (an MCQ item's options): (row, variant) -> (Prompt, Vocabulary)
    prompt: Callable[[Mapping[str, Any], Any], tuple[Any, Vocabulary]] | None = None
    parser_id: str | None = None  # the stored parser id of a row-level kind

    def accepts(self, variant: str, config: str) -> None:
        """Refuse a prompt variant the kind does not take (a fixed question, SPEC §4)."""
        if self.variants is not None and variant not in self.variants:
            raise ValueError(f"config {config!r} fixes its question (SPEC §4): use prompt "
                             f"{' or '.join(self.variants)}, not {variant!r}")

    @property
    def fixed_question(self) -> bool:
        """True when the kind's question and answers do not depend on the prompt variant."""
        return self.vocabulary is not None


KINDS: dict[str, TaskKind] = {}


def register_kind(kind: TaskKind) -> TaskKind:
    """Add a kind to the registry (a second kind of the same name is an error)."""
    if kind.name in KINDS:
        raise ValueError(f"task kind {kind.name!r} is registered twice")
    KINDS[kind.name] = kind
    return kind


register_kind(TaskKind(
    "direction", "the main question: does the attribute increase or decrease over time (SPEC §3)",
    GRID_ROW_FIELDS, GRID_SAMPLE_FIELDS,
))
register_kind(TaskKind(
    "yesno", "change detection: does the attribute vary with time (SPEC §4)", GRID_ROW_FIELDS, GRID_SAMPLE_FIELDS,
    vocabulary=YESNO_VOCABULARY, question=yesno_prompt, variants=("default", "audio_first"),
))
register_kind(TaskKind(
    "ternary", "increase / decrease / constant (SPEC §4)", GRID_ROW_FIELDS, GRID_SAMPLE_FIELDS,
    vocabulary=TERNARY_VOCABULARY, question=ternary_prompt, variants=("default", "audio_first"),
))
register_kind(TaskKind(
    "mcq", "multiple choice over 2-4 lettered options with a true and an optional adversarial label (VoxParadox)",
    ("audio", "benchmark_clip_id", "category", *MCQ_FIELDS), ("kind", "task", "options", "adversarial", "source_clip_id"),
    variants=("default", "audio_first"), metrics=mcq_summary, group="mcq", group_metrics=mcq_macro,
    lm_eval_metrics={"acc": True, "ala": False, "ala_gap": False}, prompt=mcq_prompt, parser_id=mcq_parser_id(),
))
register_kind(TaskKind(
    "conflict", "the main question on carriers whose words claim a direction (lexical conflict, VoxParadox's ALA)",
    (*GRID_ROW_FIELDS, *CLAIM_FIELDS), (*GRID_SAMPLE_FIELDS, *CLAIM_FIELDS, "template_id", "voice_id"),
    metrics=conflict_summary, group="conflict", group_metrics=conflict_macro, lm_eval_metrics=CONFLICT_METRICS,
))  # fmt: skip
register_kind(TaskKind(
    "classify", "classification over any label set, one audio per item, lettered forced choice (MELD, Table 22)",
    ("audio", "benchmark_clip_id", "category", "question", "options", "answer", "task"),
    ("kind", "task", "options", "source_clip_id"), variants=("default", "audio_first"),
    metrics=classification_summary, group="classify", group_metrics=classification_macro,
    lm_eval_metrics=CLASSIFY_LM_EVAL, prompt=classify_prompt, parser_id=mcq_parser_id(),
))  # fmt: skip


def get_kind(name: str) -> TaskKind:
    """A kind by name, with "did you mean"."""
    if name in KINDS:
        return KINDS[name]
    close = difflib.get_close_matches(name, list(KINDS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown task kind {name!r}{hint} (kinds: {', '.join(KINDS)})")


def task_kind(config: str) -> TaskKind:
    """The kind of a declared config (its YAML `kind`)."""
    decl = task_config(config).decl
    try:
        return get_kind(decl.kind)
    except ValueError as err:
        raise ValueError(f"{decl.file}: kind: {err}") from None


def row_kind(row: Mapping[str, Any]) -> TaskKind:
    """The kind of a benchmark or samples row: the kind it carries (MCQ rows), else its config's."""
    return get_kind(str(row["kind"])) if row.get("kind") else task_kind(str(row["category"]))


def source_kind(source: Any, config: str) -> TaskKind:
    """A config's kind as its row source knows it (a mapped MCQ source: mcq), else its declaration's."""
    kind_of = getattr(source, "kind_of", None)
    return get_kind(kind_of(config)) if kind_of is not None else task_kind(config)


def rows_kind(config: str, rows: Rows) -> TaskKind:
    """The kind of a config's samples rows (a config named after a mapped MCQ task is not declared)."""
    return row_kind(rows[0]) if rows else task_kind(config)


def fixed_vocabularies() -> dict[str, Vocabulary]:
    """Kind name -> answer vocabulary of the kinds whose question is fixed (yesno, ternary, ...)."""
    return {k.name: k.vocabulary for k in KINDS.values() if k.vocabulary is not None}
