"""The answer instruction of the prompts stored per row (SPEC §4-§5; each config declares its question in its
YAML file); the prompt variants live in the harness."""

from __future__ import annotations


def answer_line(*words: str) -> str:
    """`Answer with only one word: "a" or "b".` (three words: `"a", "b" or "c"`)."""
    quoted = [f'"{w}"' for w in words]
    return f"Answer with only one word: {', '.join(quoted[:-1])} or {quoted[-1]}."

