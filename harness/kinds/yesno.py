"""The yes/no kind: change detection, does the attribute vary with time (the augmented clips plus the
unmodified sources). A fixed question and answer words; scored by macro-F1 over the gold classes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.kinds.base import Kind, register_kind, word_answers
from harness.parsing import NO, YES, AnswerParser, Vocabulary, register_parser
from harness.tables import markdown_table, pct

NAME = "yesno"
FIXED_VARIANTS = ("default", "audio_first")
# "yes" / "no" as whole words (so "nothing" is not "no"); stored as "yesno-unique-answer-v1"
YESNO_PARSER = register_parser(AnswerParser(NAME, ((YES, frozenset({"yes"})), (NO, frozenset({"no"}))), "answer"))
YESNO_VOCABULARY = Vocabulary((YES, NO), (YES, NO), YESNO_PARSER)


def fixed_question_section(res: Mapping[str, Mapping[str, Any]], group: Mapping[str, Any]) -> list[str]:
    """The fixed-question configs' table: macro-F1 over the gold classes, balanced and plain accuracy."""
    rows = [[c, str(s["n"]), pct(s.get("macro_f1")), pct(s["balanced_accuracy"]), pct(s["accuracy"]),
             str(s["n_unparsed"])] for c, s in res.items()]
    return ["## Problem formats (SPEC §4): macro-F1 over the gold classes, unparsed = miss of the true class",
            markdown_table(["config", "n", "macro-F1", "balanced", "acc", "unparsed"], rows)] if rows else []


YESNO = register_kind(Kind(
    NAME, "change detection: does the attribute vary with time", vocabulary=YESNO_VOCABULARY,
    variants=FIXED_VARIANTS, config_metric="macro_f1", section=fixed_question_section,
    answers=word_answers,
))
