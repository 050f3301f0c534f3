"""The answer instruction of the prompts stored per row (SPEC §4-§5; each config declares its question in its
YAML file) and the main question; the prompt variants live in the harness."""

from __future__ import annotations

ANSWER_LINE = 'Answer with only one word: "increase" or "decrease".'


def answer_line(*words: str) -> str:
    """`Answer with only one word: "a" or "b".` (three words: `"a", "b" or "c"`)."""
    quoted = [f'"{w}"' for w in words]
    return f"Answer with only one word: {', '.join(quoted[:-1])} or {quoted[-1]}."


def main_prompt(attribute: str) -> str:
    """`Does the {attr} increase or decrease over time?` + blank line + the answer instruction."""
    return f"Does the {attribute} increase or decrease over time?\n\n{ANSWER_LINE}"
