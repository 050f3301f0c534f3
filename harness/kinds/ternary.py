"""The ternary kind: increase / decrease / constant over the augmented clips plus the unmodified sources.
A fixed question and answer words; scored by macro-F1 over the gold classes (the yes/no kind's table)."""

from __future__ import annotations

from harness.kinds.base import Kind, register_kind, word_answers
from harness.kinds.yesno import FIXED_VARIANTS, fixed_question_section
from harness.parsing import (
    CONSTANT,
    DECREASE,
    DECREASE_WORDS,
    INCREASE,
    INCREASE_WORDS,
    AnswerParser,
    Vocabulary,
    register_parser,
)

NAME = "ternary"
# the main words plus "constant"; stored as "ternary-unique-answer-v1"
TERNARY_PARSER = register_parser(AnswerParser(
    NAME, ((INCREASE, INCREASE_WORDS), (DECREASE, DECREASE_WORDS), (CONSTANT, frozenset({CONSTANT}))), "answer"))
TERNARY_VOCABULARY = Vocabulary((INCREASE, DECREASE, CONSTANT), (INCREASE, DECREASE, CONSTANT), TERNARY_PARSER)

TERNARY = register_kind(Kind(
    NAME, "increase / decrease / constant", vocabulary=TERNARY_VOCABULARY,
    variants=FIXED_VARIANTS, config_metric="macro_f1", section=fixed_question_section, answers=word_answers,
))
