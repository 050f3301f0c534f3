"""Answer parsing (SPEC §5): one versioned parser per answer vocabulary, rule "exactly one family".

Documented consequences of the published rule, kept on purpose so our numbers stay comparable:
- whole words only: "increasing" is unparsed by the main parser (it is a synonym-parser word);
- negation is not understood: "not increase" parses as increase;
- "increase or decrease" (both families) is ambiguous, hence unparsed.
"""

from __future__ import annotations

import difflib
import re
import string
from dataclasses import dataclass
from functools import cached_property

# Bump when any parser's behaviour changes; stored in every samples row and in results.json.
PARSER_VERSION = "1"

INCREASE, DECREASE = "increase", "decrease"

# Characters stripped around a raw answer before the exact-match check (ASCII and typographic quotes).
_EDGE_PUNCTUATION = string.punctuation + string.whitespace + "\u2018\u2019\u201c\u201d\u00ab\u00bb\u3002"


@dataclass(frozen=True)
class AnswerParser:
    """Maps a raw model output to "increase", "decrease" or None (unparsed)."""

    name: str
    increase_words: frozenset[str]
    decrease_words: frozenset[str]

    @property
    def id(self) -> str:
        """Identifier stored with results; equals the published parser ids at version 1."""
        return f"{self.name}-unique-direction-v{PARSER_VERSION}"

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        words = sorted(self.increase_words | self.decrease_words, key=lambda w: (-len(w), w))
        return re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE)

    def families(self, raw: str | None) -> set[str]:
        """The answer families whose words occur in raw as whole words (case-insensitive)."""
        if not raw:
            return set()
        found = {m.lower() for m in self._pattern.findall(raw)}
        return {INCREASE if w in self.increase_words else DECREASE for w in found}

    def parse(self, raw: str | None) -> str | None:
        """The label when exactly one family occurs, else None."""
        fams = self.families(raw)
        return next(iter(fams)) if len(fams) == 1 else None

    def is_ambiguous(self, raw: str | None) -> bool:
        """True when both families occur (the published `n_ambiguous`)."""
        return len(self.families(raw)) > 1


MAIN = AnswerParser("main", frozenset({"increase", "increases"}), frozenset({"decrease", "decreases"}))
SYNONYM = AnswerParser(
    "synonym",
    frozenset({
        "increase", "increases", "increasing", "rise", "rises", "rising",
        "upward", "upwards", "faster", "accelerate", "accelerates", "accelerating",
    }),
    frozenset({
        "decrease", "decreases", "decreasing", "fall", "falls", "falling", "downward", "downwards",
        "slower", "decline", "declines", "declining", "decelerate", "decelerates", "decelerating",
    }),
)  # fmt: skip
PARSERS: dict[str, AnswerParser] = {p.name: p for p in (MAIN, SYNONYM)}


def get_parser(name_or_id: str) -> AnswerParser:
    """A parser by name ("main", "synonym") or by stored id ("main-unique-direction-v1")."""
    name = name_or_id.split("-unique-direction-v")[0]
    if name in PARSERS:
        return PARSERS[name]
    close = difflib.get_close_matches(name, list(PARSERS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown answer parser {name_or_id!r}{hint} (known: {', '.join(PARSERS)})")


def normalize_exact(raw: str | None) -> str:
    """raw stripped of whitespace and edge punctuation/quotes, lower-cased (for exact-match checks)."""
    return (raw or "").strip(_EDGE_PUNCTUATION).lower()


def is_exact(raw: str | None, answer_words: tuple[str, str] | list[str]) -> bool:
    """True when the whole output is exactly one of the prompt's answer words."""
    return normalize_exact(raw) in {w.lower() for w in answer_words}
