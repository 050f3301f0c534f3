"""The direction kind: the published VocalGrad question, does the attribute increase or decrease over time.

Its question and answer words come from the prompt variant (harness.prompts); it is scored by accuracy with
Wilson and clustered intervals, and its nine categories' mean is results.json's `vocalgrad` group.
"""

from __future__ import annotations

from harness.kinds.base import Kind, register_kind, word_answers

DIRECTION = register_kind(Kind(
    "direction", "the main question: does the attribute increase or decrease over time",
    headline=("accuracy", "mean accuracy"), answers=word_answers,
))
