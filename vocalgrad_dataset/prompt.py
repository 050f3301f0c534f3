"""The main VocalGrad prompt (SPEC §5), stored per row; variants live in the harness."""

from __future__ import annotations

ANSWER_LINE = 'Answer with only one word: "increase" or "decrease".'


def main_prompt(attribute: str) -> str:
    """`Does the {attr} increase or decrease over time?` + blank line + the answer instruction."""
    return f"Does the {attribute} increase or decrease over time?\n\n{ANSWER_LINE}"
