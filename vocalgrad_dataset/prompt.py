"""The prompts stored per row (SPEC §4-§5): main question, yes/no and ternary formats; variants live in the harness."""

from __future__ import annotations

ANSWER_LINE = 'Answer with only one word: "increase" or "decrease".'


def answer_line(*words: str) -> str:
    """`Answer with only one word: "a" or "b".` (three words: `"a", "b" or "c"`)."""
    quoted = [f'"{w}"' for w in words]
    return f"Answer with only one word: {', '.join(quoted[:-1])} or {quoted[-1]}."


def main_prompt(attribute: str) -> str:
    """`Does the {attr} increase or decrease over time?` + blank line + the answer instruction."""
    return f"Does the {attribute} increase or decrease over time?\n\n{ANSWER_LINE}"


def yesno_prompt(attribute: str) -> str:
    """SPEC §4 change detection: `Does the {attr} vary with time?` + `"yes" or "no"`."""
    return f"Does the {attribute} vary with time?\n\n{answer_line('yes', 'no')}"


def ternary_prompt(attribute: str) -> str:
    """SPEC §4 ternary question: `How does the {attr} vary with time?` + increase/decrease/constant."""
    return f"How does the {attribute} vary with time?\n\n{answer_line('increase', 'decrease', 'constant')}"


# The prompt of each problem format ("source": the 100 unmodified clips asked the main question).
# Lexical-conflict rows ask the main question: the words claim one direction, the sound may do the other.
FORMAT_PROMPTS = {"direction": main_prompt, "yesno": yesno_prompt, "ternary": ternary_prompt, "source": main_prompt,
                  "conflict": main_prompt, "conflict-reversed": main_prompt}


def format_prompt(fmt: str, attribute: str) -> str:
    """The stored prompt of a row of the given problem format."""
    return FORMAT_PROMPTS[fmt](attribute)
