"""Answer parsing (SPEC §5): one versioned parser per answer vocabulary, rule "exactly one family".

Vocabularies: `main` (increase/decrease, the main prompt and its order/wording variants), `synonym`
(the paraphrase pairs: the published single synonym list), `yesno` (change detection) and `ternary`
(increase/decrease/constant). Every parser maps a raw output to the one label whose family of words
occurs in it as whole words (case-insensitive), or to None when none or several families occur.

Documented consequences of the published rule, kept on purpose so our numbers stay comparable:
- whole words only: "increasing" is unparsed by the main parser (it is a synonym-parser word);
- negation is not understood: "not increase" parses as increase;
- "increase or decrease" (both families) is ambiguous, hence unparsed.
"""

from __future__ import annotations

import difflib
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

# Bump when any parser's behaviour changes; stored in every samples row and in results.json.
PARSER_VERSION = "1"

INCREASE, DECREASE = "increase", "decrease"

# Characters stripped around a raw answer before the exact-match check (ASCII and typographic quotes).
_EDGE_PUNCTUATION = string.punctuation + string.whitespace + "\u2018\u2019\u201c\u201d\u00ab\u00bb\u3002"


@dataclass(frozen=True)
class AnswerParser:
    """Maps a raw model output to one of its labels ("increase", "yes", "constant", ...) or None (unparsed)."""

    name: str
    vocabulary: tuple[tuple[str, frozenset[str]], ...]  # (label, its words) per answer family
    kind: str = "direction"  # "direction" parsers keep the published ids; the format parsers say "answer"

    @property
    def id(self) -> str:
        """Identifier stored with results; equals the published parser ids at version 1."""
        return f"{self.name}-unique-{self.kind}-v{PARSER_VERSION}"

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels this parser can return, in vocabulary order."""
        return tuple(label for label, _ in self.vocabulary)

    @cached_property
    def _label_of(self) -> dict[str, str]:
        return {w: label for label, words in self.vocabulary for w in words}

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        words = sorted(self._label_of, key=lambda w: (-len(w), w))
        return re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE)

    def families(self, raw: str | None) -> set[str]:
        """The answer families whose words occur in raw as whole words (case-insensitive)."""
        if not raw:
            return set()
        return {self._label_of[m.lower()] for m in self._pattern.findall(raw)}

    def parse(self, raw: str | None) -> str | None:
        """The label when exactly one family occurs, else None."""
        fams = self.families(raw)
        return next(iter(fams)) if len(fams) == 1 else None

    def is_ambiguous(self, raw: str | None) -> bool:
        """True when both families occur (the published `n_ambiguous`)."""
        return len(self.families(raw)) > 1


CONSTANT, YES, NO = "constant", "yes", "no"
_INC = frozenset({"increase", "increases"})
_DEC = frozenset({"decrease", "decreases"})
MAIN = AnswerParser("main", ((INCREASE, _INC), (DECREASE, _DEC)))
SYNONYM = AnswerParser(
    "synonym",
    (
        (INCREASE, frozenset({
            "increase", "increases", "increasing", "rise", "rises", "rising",
            "upward", "upwards", "faster", "accelerate", "accelerates", "accelerating",
        })),
        (DECREASE, frozenset({
            "decrease", "decreases", "decreasing", "fall", "falls", "falling", "downward", "downwards",
            "slower", "decline", "declines", "declining", "decelerate", "decelerates", "decelerating",
        })),
    ),
)  # fmt: skip
# The fixed-question kinds register theirs (harness.kinds.yesno, harness.kinds.ternary: register_parser).
PARSERS: dict[str, AnswerParser] = {p.name: p for p in (MAIN, SYNONYM)}
INCREASE_WORDS, DECREASE_WORDS = _INC, _DEC  # the main parser's families, which the ternary parser extends
_ID_RE = re.compile(r"^(?P<name>.+?)-unique-(?:direction|answer)-v\d+$")


@dataclass(frozen=True)
class Vocabulary:
    """The answer words a prompt offers, the label each stands for, and the parser that reads outputs."""

    words: tuple[str, ...]  # score_choices column order
    labels: tuple[str, ...]
    parser: AnswerParser | OptionParser

    @property
    def choices(self) -> tuple[str, ...]:
        """The answer words, the columns of score_choices."""
        return self.words

    def decide(self, scores: Sequence[float]) -> tuple[str | None, str | None, float]:
        """(label, word, margin) from one row of score_choices; a tie for the best score decides nothing.

        Two words: margin = score(first) − score(second) (increase − decrease, yes − no). More words:
        margin = best − runner-up (≥ 0).
        """
        s = np.asarray(scores, dtype=np.float64)
        order = np.argsort(-s, kind="stable")
        margin = float(s[0] - s[1]) if len(s) == 2 else float(s[order[0]] - s[order[1]])
        if s[order[0]] == s[order[1]]:
            return None, None, margin
        return self.labels[order[0]], self.words[order[0]], margin


MAIN_VOCABULARY = Vocabulary((INCREASE, DECREASE), (INCREASE, DECREASE), MAIN)


def register_parser(parser: AnswerParser) -> AnswerParser:
    """Make a parser findable by its name and stored id (a kind's own answer words); returns it."""
    if PARSERS.get(parser.name, parser) is not parser:
        raise ValueError(f"answer parser {parser.name!r} is registered twice")
    PARSERS[parser.name] = parser
    return parser


def get_parser(name_or_id: str) -> AnswerParser:
    """A parser by name ("main", "synonym", a kind's) or stored id ("main-unique-direction-v1")."""
    m = _ID_RE.match(name_or_id)
    name = m["name"] if m else name_or_id
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


# ---- multiple-choice answers -----------------------------------------------------------------------------
# Bump when the MCQ parser's behaviour changes; its id is stored in every MCQ samples row.
MCQ_PARSER_VERSION = "1"
OPTION_PARSER_PREFIX = "mcq-letter-or-option-v"  # stored ids: the prefix and MCQ_PARSER_VERSION
LETTERS = "ABCD"  # 2-4 lettered options of an MCQ item
OPTION_LETTERS = "ABCDEFGHIJKL"  # a classification task letters up to 12 labels; A-D as for MCQ
_MARKER = r"(?i:\b(?:answer|option|choice)\b)\s*(?i:is)?\s*[:=-]?\s*[\(\[]?"


@dataclass(frozen=True)
class OptionParser:
    """Reads one multiple-choice item's answer: a letter (A-D) or the text of exactly one option.

    Rules, in order: the whole answer is a letter ("B", "(B)", "b.", "[B]"); a letter after "answer",
    "option" or "choice" ("Answer: B) high-low-medium", "The answer is (C)"); a leading capital letter with
    a bracket, dot or colon ("B) high-low-medium", "C. female"); else the text of exactly one option as a
    whole phrase (case-insensitive; "female" does not contain the option "male", and "low-high-medium" does
    not contain "low"). A letter beyond the item's options, several options, or none (a refusal) is None.
    """

    options: tuple[str, ...]

    @property
    def id(self) -> str:
        """Identifier stored with results."""
        return mcq_parser_id()

    @property
    def labels(self) -> tuple[str, ...]:
        return self.options

    @cached_property
    def _letters(self) -> str:
        return OPTION_LETTERS[: len(self.options)]

    def _letter(self, text: str) -> str | None:
        cls = f"[{self._letters}]"
        lower = f"[{self._letters.lower()}]"
        whole = re.fullmatch(rf"[\s(\[]*({cls}|{lower})[\s)\].:]*", text)
        if whole:
            return whole[1].upper()
        marked = re.search(rf"{_MARKER}({cls})(?![\w'-])(?!\s+[a-z])", text)
        if marked:
            return marked[1]
        lead = re.match(rf"\s*[(\[]?({cls})[)\].:](?:\s|$)", text)
        return lead[1] if lead else None

    def option_hits(self, raw: str | None) -> list[str]:
        """The options whose text occurs in raw as a whole phrase (case-insensitive), in option order."""
        if not raw:
            return []
        return [o for o in self.options
                if re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", raw, re.IGNORECASE)]

    def parse(self, raw: str | None) -> str | None:
        """The chosen option's text, or None (unparsed)."""
        text = (raw or "").strip()
        if not text:
            return None
        letter = self._letter(text)
        if letter is not None:
            return self.options[OPTION_LETTERS.index(letter)]
        hits = self.option_hits(text)
        return hits[0] if len(hits) == 1 else None

    def is_ambiguous(self, raw: str | None) -> bool:
        """True when no letter decides and several options' texts occur."""
        text = (raw or "").strip()
        return bool(text) and self._letter(text) is None and len(self.option_hits(text)) > 1


def mcq_parser_id() -> str:
    """The stored id of the multiple-choice parser ("mcq-letter-or-option-v1")."""
    return f"{OPTION_PARSER_PREFIX}{MCQ_PARSER_VERSION}"


def mcq_vocabulary(options: Sequence[str]) -> Vocabulary:
    """One item's answers: the letters (scored in choices mode) standing for its options."""
    opts = tuple(str(o) for o in options)
    return Vocabulary(tuple(OPTION_LETTERS[: len(opts)]), opts, OptionParser(opts))


def row_parser(row: Mapping[str, Any]) -> AnswerParser | OptionParser:
    """The parser that reads a samples row's raw answer: its stored parser, bound to the row's options for MCQ."""
    stored = str(row.get("parser") or "main")
    if stored.startswith(OPTION_PARSER_PREFIX):
        return OptionParser(tuple(row.get("options") or ()))
    return get_parser(stored)
