"""The choice kind: one audio, a question and lettered options, the answer one of them.

Two declarations of the same kind: `mcq`, multiple choice with a true and an optional adversarial label (the
label the words assert: VoxParadox's GT accuracy, ALA and Δ = ALA − GT), and `classify`, a classification
whose options are the task's label set, with no adversarial label (macro-F1 and per-class scores, MELD /
Table 22). Each row carries its own question and options, so an item is its own shard unit; a foreign dataset
maps onto the row fields with `--kind mcq|classify --columns field=col,...`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from harness.classification import (
    CLASSIFY_LM_EVAL,
    CLASSIFY_OPTIONAL,
    CLASSIFY_REQUIRED,
    MappedClassifySource,
    classification_macro,
    classification_summary,
)
from harness.kinds.base import REVERSED, AnswerOptions, Board, Kind, register_kind
from harness.mcq import MCQ_FIELDS, mcq_prompt
from harness.mcq_source import OPTIONAL as MCQ_OPTIONAL
from harness.mcq_source import REQUIRED as MCQ_REQUIRED
from harness.mcq_source import MappedMCQSource
from harness.metrics import mcq_macro, mcq_summary
from harness.parsing import Vocabulary, mcq_parser_id, mcq_vocabulary
from harness.tables import interval, markdown_table, pct

SAMPLE_FIELDS = ("kind", "task", "options", "adversarial", "adversarial_labels", "groups", "source_clip_id")


def _ci(s: Mapping[str, Any], name: str) -> str:
    return f"{pct(s.get(name))} {interval(s, name)}"


def _ci_range(s: Mapping[str, Any], name: str) -> str:
    return "—" if s.get(f"{name}_ci_low") is None or s.get(f"{name}_ci_high") is None else interval(s, name)


def letter_answers(row: Mapping[str, Any], vocabulary: Vocabulary | None = None) -> AnswerOptions:
    """An item's answers as the letters its prompt offers (A-D); the adversarial label's letter is the claim."""
    options = [str(o) for o in row["options"]]
    letters = dict(zip(options, mcq_vocabulary(options).words, strict=True))
    answer, adversarial = row.get("answer"), row.get("adversarial")
    if answer not in letters:
        raise ValueError(f"{row.get('benchmark_clip_id', '?')}: answer {answer!r} is not one of its options {options}")
    wrong = tuple(letters[o] for o in options if o != answer)
    return AnswerOptions(letters[answer], wrong, letters.get(adversarial) if adversarial != answer else None)


def task_word(row: Mapping[str, Any]) -> str | None:
    """The attribute word a probe reads in an item: its declared task ("pitch" of voxparadox-pitch) when the
    question contains it as a word, else None (a mapped benchmark's task, a question naming no attribute)."""
    from vocalgrad_dataset.tasks import resolve

    try:
        task = str(resolve(str(row["category"])).params.get("task") or "")
    except ValueError:  # a mapped benchmark's task is not a declared config
        return None
    return task if task and re.search(rf"\b{re.escape(task)}\b", str(row.get("question", ""))) else None


Summaries = Mapping[str, Mapping[str, Any]]  # config -> its metrics summary


def mcq_section(res: Summaries, group: Mapping[str, Any]) -> list[str]:
    """GT accuracy, ALA and Δ = ALA − GT per task and macro-averaged, with 95 % intervals."""
    head = ["task", "n", "GT acc [95% CI]", "ALA [95% CI]", "Δ = ALA − GT [95% CI]", "unparsed", "errors"]
    body = [[c, str(s["n"]), _ci(s, "acc"), _ci(s, "ala"), _ci(s, "ala_gap"), str(s["n_unparsed"]), str(s["n_error"])]
            for c, s in res.items()]
    if group:
        body.append([f"**macro mean ({group['n_configs']} tasks)**", "", _ci(group, "acc"), _ci(group, "ala"),
                     _ci(group, "ala_gap"), "", ""])
    title = "## Multiple choice: ground truth (GT), adversarial-label agreement (ALA) and Δ, %"
    if any(str(c).endswith(REVERSED) for c in res):
        title += " — time-reversed controls (their own macro, never averaged with forward tasks)"
    return [title, "GT: answers equal to the label the audio carries; ALA: answers equal to the label the transcript "
            "asserts (or any of its set); unparsed answers count against both. Chance is 1/#options (VoxParadox "
            "Table 6 for context: README).", markdown_table(head, body), *group_breakdowns(res, group)]


def group_breakdowns(res: Summaries, group: Mapping[str, Any]) -> list[str]:
    """GT and ALA per value of each group column (MMSU's category, sub-category): per task, then over all."""
    cells = [(c, s["by_group"]) for c, s in res.items() if s.get("by_group")]
    if group.get("by_group"):
        cells.append(("all tasks", group["by_group"]))
    out: list[str] = []
    for column in dict.fromkeys(col for _c, by in cells for col in by):
        body = [[c, value, str(s.get("n")), _ci(s, "acc"), _ci(s, "ala")]
                for c, by in cells for value, s in (by.get(column) or {}).items()]
        out += [f"### By {column} (%)", markdown_table(["task", column, "n", "GT acc [95% CI]", "ALA [95% CI]"], body)]
    return out


def mcq_compare(runs: Sequence[tuple[str, Summaries, Mapping[str, Any]]]) -> list[str]:
    """The macro mean over tasks of GT, ALA and Δ, one line per run that has it."""
    rows = [[label, _ci(g, "acc"), _ci(g, "ala"), _ci(g, "ala_gap")] for label, _res, g in runs if g]
    return ["## Multiple choice, macro mean over tasks (%)",
            markdown_table(["model", "GT acc", "ALA", "Δ"], rows)] if rows else []


def classify_section(res: Summaries, group: Mapping[str, Any]) -> list[str]:
    """Per task: precision, recall, F1 (bootstrap 95 % intervals) and support per class, then macro-F1,
    support-weighted F1 and accuracy."""
    out: list[str] = []
    for c, s in res.items():
        head = ["class", "precision", "95% CI", "recall", "95% CI", "F1", "95% CI", "support"]
        body = [[lab, pct(s.get(f"precision_{lab}")), _ci_range(s, f"precision_{lab}"),
                 pct(s.get(f"recall_{lab}")), _ci_range(s, f"recall_{lab}"),
                 pct(s.get(f"f1_{lab}")), _ci_range(s, f"f1_{lab}"), str(s.get(f"support_{lab}", "—"))]
                for lab in s.get("labels") or []]
        n = str(s.get("n", "—"))
        body += [[f"**{name}**", "", "", "", "", pct(s.get(m)), _ci_range(s, m), n]
                 for name, m in (("macro F1", "macro_f1"), ("weighted F1", "weighted_f1"), ("accuracy", "accuracy"))]
        out += [f"## Classification: {c} (%, seeded bootstrap 95 % CI over items)",
                f"{s.get('n_unparsed', 0)} unparsed and {s.get('n_error', 0)} failed answers count as misses of "
                "their true class (no class's false positive); a class never predicted has precision 0. "
                "Weighted F1 weights each class's F1 by its support.", markdown_table(head, body)]
    return out


def classify_compare(runs: Sequence[tuple[str, Summaries, Mapping[str, Any]]]) -> list[str]:
    """Macro-F1 with its interval per classification task, one line per run."""
    tasks = list(dict.fromkeys(c for _, res, _g in runs for c in res))
    if not tasks:
        return []
    rows = [[label, *(_ci(res[c], "macro_f1") if c in res else "—" for c in tasks)] for label, res, _g in runs]
    return ["## Classification tasks: macro-F1 % [95% CI]", markdown_table(["model", *tasks], rows)]


def item_buttons(row: Mapping[str, Any]) -> list[dict[str, str]]:
    """The listening app's answer buttons of an item: the option's text is what is stored, "A. text" what is
    shown (the letters its prompt gives them)."""
    letters = mcq_vocabulary(row["options"]).words
    return [{"label": o, "text": f"{letter}. {o}"} for letter, o in zip(letters, row["options"], strict=True)]


def _mcq_source(dataset: str, split: str, columns: Any, **options: Any) -> MappedMCQSource:
    return MappedMCQSource(dataset, split, columns, kind=MCQ, **options)  # options: hub_config, where


def _classify_source(dataset: str, split: str, columns: Any, **options: Any) -> MappedClassifySource:
    return MappedClassifySource(dataset, split, columns, kind=CLASSIFY, **options)


CHOICE_VARIANTS = ("default", "audio_first")
MCQ = register_kind(Kind(
    "mcq", "multiple choice over 2-4 lettered options with a true and an optional adversarial label (VoxParadox)",
    ("audio", "benchmark_clip_id", "category", *MCQ_FIELDS), SAMPLE_FIELDS, grid=False, own_units=True,
    variants=CHOICE_VARIANTS, prompt=mcq_prompt, parser_id=mcq_parser_id(), metrics=mcq_summary, group="mcq",
    group_metrics=mcq_macro, lm_eval_metrics={"acc": True, "ala": False, "ala_gap": False},
    headline=("acc", "MCQ accuracy"), config_metric="acc", section=mcq_section, compare=mcq_compare,
    board=Board("Listen or read? Multiple-choice tasks with an adversarial label (not ranked)",
                "GT: answers equal to the label the audio carries; ALA: answers equal to the label the words "
                "assert; macro means over the run's tasks.",
                (("acc", "GT acc"), ("ala", "ALA"), ("ala_gap", "Δ = ALA − GT"))),
    answers=letter_answers, probe_word=task_word, buttons=item_buttons,
    columns=(MCQ_REQUIRED, MCQ_OPTIONAL), mapped_source=_mcq_source, claims=True,
))  # fmt: skip
CLASSIFY = register_kind(Kind(
    "classify", "classification over any label set, one audio per item, lettered forced choice (MELD, Table 22)",
    ("audio", "benchmark_clip_id", "category", "question", "options", "answer", "task"),
    ("kind", "task", "options", "source_clip_id"), grid=False, own_units=True, variants=CHOICE_VARIANTS,
    prompt=mcq_prompt, parser_id=mcq_parser_id(), metrics=classification_summary, group="classify",
    group_metrics=classification_macro, lm_eval_metrics=CLASSIFY_LM_EVAL, headline=("macro_f1", "macro-F1"),
    config_metric="macro_f1", section=classify_section, compare=classify_compare, answers=letter_answers,
    buttons=item_buttons, columns=(CLASSIFY_REQUIRED, CLASSIFY_OPTIONAL), mapped_source=_classify_source, confusion=True,
))  # fmt: skip
