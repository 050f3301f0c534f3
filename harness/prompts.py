"""Prompt variants of SPEC §5 by name, each with its answer vocabulary.

Names: a base (`default`, `paraphrase-1..3`, `cross-attribute:<category>`) joined by "+" with modifiers
`swap_order`, `audio_ref`, `audio_first` (e.g. `swap_order+audio_ref`). Paraphrases combine only with
`audio_first`. TODO(few-shot): SPEC §5 few-shot (4 labelled train clips per query, seed 1234) needs
train rows beside each query; it belongs to a later issue and is refused here by name.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from harness.data import CONFIGS, attribute_word, config_name
from harness.models.protocol import AudioClip, Prompt
from harness.parsing import MAIN, SYNONYM, AnswerParser

MODIFIERS: tuple[str, ...] = ("swap_order", "audio_ref", "audio_first")  # canonical order in names
ANSWER_LINE = 'Answer with only one word: "{a}" or "{b}".'


@dataclass(frozen=True)
class Vocabulary:
    """The two answer words a prompt offers and the parser that reads its outputs."""

    increase: str
    decrease: str
    parser: AnswerParser

    @property
    def choices(self) -> tuple[str, str]:
        """(increase word, decrease word): the order of score_choices columns."""
        return (self.increase, self.decrease)


MAIN_VOCABULARY = Vocabulary("increase", "decrease", MAIN)

# SPEC §5 paraphrases: category -> [(question, increase word, decrease word)], numbered from 1.
PARAPHRASES: dict[str, list[tuple[str, str, str]]] = {
    "volume": [
        ("Does the loudness rise or fall as the audio progresses?", "rise", "fall"),
        ("Does the sound intensity increase or decrease throughout the recording?", "increase", "decrease"),
        ("Is the audio intensity increasing or decreasing over time?", "increasing", "decreasing"),
    ],
    "pitch": [
        ("Does the tone rise or fall over time?", "rise", "fall"),
        ("Does the sound frequency change upward or downward over time?", "upward", "downward"),
        ("Over time, does the frequency of the voice rise or decline?", "rise", "decline"),
    ],
    "speed": [
        ("Does the pace of speech become faster or slower over time?", "faster", "slower"),
        ("Does the speech tempo increase or decrease with time?", "increase", "decrease"),
        ("Does the pace of delivery accelerate or decelerate over time?", "accelerate", "decelerate"),
    ],
}


@dataclass(frozen=True)
class Variant:
    """A resolved prompt variant."""

    name: str  # canonical name
    base: str  # "default" | "paraphrase" | "cross-attribute"
    paraphrase: int = 0  # 1..3 for paraphrase variants
    cross_category: str = ""  # config whose attribute word is asked about
    swap_order: bool = False
    audio_ref: bool = False
    audio_first: bool = False

    def vocabulary(self, category: str) -> Vocabulary:
        """Answer words and parser for a row of this category."""
        if self.base != "paraphrase":
            return MAIN_VOCABULARY
        _, inc, dec = _paraphrase(category, self.paraphrase)
        # The published paraphrase runs used one synonym parser for all nine questions.
        return Vocabulary(inc, dec, SYNONYM)

    def text(self, category: str, attribute: str) -> str:
        """The prompt's text: question, blank line, answer instruction."""
        if self.base == "paraphrase":
            question, inc, dec = _paraphrase(category, self.paraphrase)
            return f"{question}\n\n{ANSWER_LINE.format(a=inc, b=dec)}"
        if self.base == "cross-attribute":
            attribute = attribute_word(self.cross_category)
        subject = f"the {attribute} of this audio clip" if self.audio_ref else f"the {attribute}"
        a, b = ("decrease", "increase") if self.swap_order else ("increase", "decrease")
        return f"Does {subject} {a} or {b} over time?\n\n{ANSWER_LINE.format(a=a, b=b)}"


def variant_names() -> list[str]:
    """Every nameable variant (modifier combinations of default, paraphrases, cross-attributes)."""
    combos = ["+".join(m for m, on in zip(MODIFIERS, bits, strict=True) if on) for bits in _bit_tuples()]
    names = [c or "default" for c in combos]
    names += [f"paraphrase-{i}" for i in (1, 2, 3)] + [f"paraphrase-{i}+audio_first" for i in (1, 2, 3)]
    names += [f"cross-attribute:{c}" for c in CONFIGS]
    return names


def _bit_tuples() -> list[tuple[bool, ...]]:
    return [tuple(bool(i >> k & 1) for k in range(len(MODIFIERS))) for i in range(2 ** len(MODIFIERS))]


def _unknown(name: str, why: str = "") -> ValueError:
    close = difflib.get_close_matches(name, variant_names(), n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ValueError(f"unknown prompt variant {name!r}{why}{hint}")


def get_variant(name: str) -> Variant:
    """Resolve a variant name ("swap_order+audio_ref", "paraphrase-2", "cross-attribute:echo", ...)."""
    parts = [p.strip() for p in name.split("+") if p.strip()]
    base_parts = [p for p in parts if p not in MODIFIERS]
    mods = {p for p in parts if p in MODIFIERS}
    if len(base_parts) > 1 or not parts or len(mods) + len(base_parts) != len(parts):
        raise _unknown(name)
    base = base_parts[0] if base_parts else "default"
    kw: dict[str, Any] = {m: m in mods for m in MODIFIERS}
    if base == "default":
        canon = "+".join(m for m in MODIFIERS if m in mods) or "default"
        return Variant(canon, "default", **kw)
    if base.startswith("paraphrase-") and base[len("paraphrase-") :] in ("1", "2", "3"):
        if mods - {"audio_first"}:
            raise _unknown(name, " (paraphrases combine only with audio_first)")
        return Variant(_canonical(base, mods), "paraphrase", paraphrase=int(base[-1]), **kw)
    if base.startswith("cross-attribute:"):
        try:
            cat = config_name(base.split(":", 1)[1])
        except ValueError as err:
            raise _unknown(name, f" ({err})") from None
        return Variant(_canonical(f"cross-attribute:{cat}", mods), "cross-attribute", cross_category=cat, **kw)
    if base.startswith("few-shot") or base.startswith("fewshot"):
        raise ValueError(f"prompt variant {name!r} (few-shot) is not implemented yet; see harness/prompts.py")
    raise _unknown(name)


def _canonical(base: str, mods: set[str]) -> str:
    return "+".join([base, *(m for m in MODIFIERS if m in mods)])


def _paraphrase(category: str, index: int) -> tuple[str, str, str]:
    category = config_name(category)
    if category not in PARAPHRASES:
        raise ValueError(f"paraphrase prompts exist only for {', '.join(PARAPHRASES)}, not {category!r}")
    return PARAPHRASES[category][index - 1]


def build_prompt(row: dict[str, Any], variant: str | Variant) -> tuple[Prompt, Vocabulary]:
    """The Prompt for one benchmark row (text before audio unless audio_first) and its vocabulary."""
    v = get_variant(variant) if isinstance(variant, str) else variant
    category = config_name(row["category"])
    attribute = row.get("attribute") or attribute_word(category)
    audio = AudioClip(row["audio"]["array"], int(row["audio"]["sampling_rate"]))
    text = v.text(category, attribute)
    segments = (audio, text) if v.audio_first else (text, audio)
    # Baselines read these; the label is deliberately absent.
    meta = {k: row.get(k) for k in ("category", "onset_sec", "offset_sec", "duration_sec")}
    return Prompt(segments, clip_id=row["benchmark_clip_id"], meta=meta), v.vocabulary(category)
