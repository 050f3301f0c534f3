"""Multiple-choice rows (the multiple-choice declaration of harness.kinds.choice): the row shape, its checks, and the lettered prompt.

An MCQ row has audio, a question, 2-4 options, the true answer (`answer`, y_true) and optionally the label
the transcript asserts (`adversarial`, y_adv), plus the task it belongs to. Answers are option texts; the
prompt letters them A-D and the parser (harness.parsing.OptionParser) reads a letter or an option's text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.audio import input_clip
from harness.models.protocol import Prompt
from harness.parsing import LETTERS, OPTION_LETTERS, Vocabulary, mcq_vocabulary

MCQ_FIELDS: tuple[str, ...] = ("question", "options", "answer", "adversarial", "task")
ANSWER_INSTRUCTION = "Answer with the letter of the correct option."
# An option's own letter, as benchmarks print them: "A. text", "A) text", "A: text", "(A) text".
LETTER_PREFIX = re.compile(r"\s*(?:\(([A-D])\)|([A-D])[.):])\s*")
LETTER_ONLY = re.compile(r"\s*\(?([A-Da-d])[.):]?\s*")


def strip_letters(options: Sequence[str]) -> list[str]:
    """The options without their printed letters, when every option carries its own letter in order ("A. x",
    "(B) y"); else unchanged (an option that merely starts with a capital letter keeps it)."""
    matches = [LETTER_PREFIX.match(o) for o in options]
    if options and all(m and (m[1] or m[2]) == LETTERS[i] and o[m.end():].strip()
                       for i, (o, m) in enumerate(zip(options, matches, strict=True))):
        return [o[m.end():].strip() for o, m in zip(options, matches, strict=True) if m]
    return list(options)


def option_list(value: Any, where: str) -> list[str]:
    """Options as a list of texts: a list, or a JSON / "|"-separated string; 2-4 distinct non-empty options."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            import json

            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                raise ValueError(f"{where}: options {value!r} are not a JSON list") from None
        else:
            value = [p.strip() for p in text.split("|")]
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(o, str) and o.strip() for o in value):
        raise ValueError(f"{where}: options must be a list of 2-{len(LETTERS)} texts, got {value!r}")
    options = strip_letters([o.strip() for o in value])
    if not 2 <= len(options) <= len(LETTERS):
        raise ValueError(f"{where}: {len(options)} options; an item has 2 to {len(LETTERS)}")
    if len({o.lower() for o in options}) != len(options):
        raise ValueError(f"{where}: options {options} repeat a text")
    return options


def option_answer(value: Any, options: Sequence[str], where: str, field: str) -> str:
    """An answer as one of the options' texts: the text itself (any case), its letter, or its 0-based index.

    The text is tried first: with options "1|2|3|4", an integer answer 2 (pyarrow reads such a column as
    int64) is the option "2", not the third option; an integer is an index only when no option reads so.
    """
    by_text = {o.lower(): o for o in options}
    for text in _answer_texts(value):
        if text.lower() in by_text:
            return by_text[text.lower()]
    text = str(value).strip() if value is not None else ""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= int(value) < len(options):
        return options[int(value)]
    letter = LETTER_ONLY.fullmatch(text)
    if letter and letter[1].upper() in LETTERS[: len(options)]:  # "B", "(B)", "b."
        return options[LETTERS.index(letter[1].upper())]
    raise ValueError(f"{where}: {field} {value!r} is not one of its options {options}")


def _answer_texts(value: Any) -> list[str]:
    """The texts an answer cell may stand for: itself, and a whole float (2.0 from a CSV) as "2"."""
    if value is None or isinstance(value, bool):
        return [] if value is None else [str(value)]
    texts = [str(value).strip()]
    prefixed = LETTER_PREFIX.match(texts[0])
    if prefixed and prefixed.end() < len(texts[0]):  # "(B) text": the option's text without its letter
        texts.append(texts[0][prefixed.end():].strip())
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        texts.append(str(int(value)))
    return texts


def adversarial_labels(value: Any, options: Sequence[str], where: str) -> list[str]:
    """The adversarial labels of an item as option texts: none, one, or a set (a list, or a text such as
    "high-medium-low, high-low-medium" split on commas only when every part is an option); ALA counts any."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        parts = [v for v in value if v is not None and str(v).strip()]
    elif value is None or not str(value).strip():
        parts = []
    else:
        parts = _label_parts(str(value), options)
    return list(dict.fromkeys(option_answer(p, options, where, "adversarial") for p in parts))


def _label_parts(text: str, options: Sequence[str]) -> list[str]:
    """One label, or its comma-separated parts when the whole is no option and every part is one."""
    known = {o.lower() for o in options}
    parts = [p.strip() for p in text.split(",")]
    if text.strip().lower() not in known and len(parts) > 1 and all(p.lower() in known for p in parts):
        return parts
    return [text]


def normalize_mcq_row(row: Mapping[str, Any], config: str, where: str, *, kind: str) -> dict[str, Any]:
    """A checked multiple-choice row of kind `kind` (the name it carries): options listed, answer and
    adversarial as option texts (they differ)."""
    cid = str(row.get("benchmark_clip_id") or "")
    where = f"{where}: item {cid}" if cid else where
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{where}: empty question")
    options = option_list(row.get("options"), where)
    answer = option_answer(row.get("answer"), options, where, "answer")
    labels = adversarial_labels(row.get("adversarial"), options, where)
    if answer in labels:
        raise ValueError(f"{where}: adversarial label equals the answer {answer!r}")
    duration = row.get("duration_sec")
    return {
        "audio": row["audio"], "benchmark_clip_id": cid, "category": config, "kind": kind,
        "question": question.strip(), "options": options, "answer": answer,
        "adversarial": labels[0] if labels else None, "adversarial_labels": labels if len(labels) > 1 else None,
        "task": str(row.get("task") or config), "label": answer,
        "source_clip_id": str(row.get("source_clip_id") or cid),
        "duration_sec": float(duration) if duration not in (None, "") else float("nan"),
    }  # fmt: skip


def mcq_text(question: str, options: Sequence[str], instruction: str | None = None) -> str:
    """The question, its lettered options one per line, and the answer instruction (ours unless the item's
    benchmark declares its own)."""
    lines = "\n".join(f"{OPTION_LETTERS[i]}. {o}" for i, o in enumerate(options))
    return f"{question}\n\n{lines}\n\n{instruction or ANSWER_INSTRUCTION}"


def mcq_prompt(row: Mapping[str, Any], variant: Any) -> tuple[Prompt, Vocabulary]:
    """The Prompt of one MCQ row (text before audio unless the variant is audio_first) and its vocabulary."""
    vocab = mcq_vocabulary(row["options"])
    audio = input_clip(row)
    text = mcq_text(row["question"], row["options"], row.get("instruction"))
    segments = (audio, text) if getattr(variant, "audio_first", False) else (text, audio)
    # Baselines read these; y_true and y_adv are deliberately absent.
    meta = {"category": row["category"], "task": row.get("task"), "question": row["question"],
            "options": tuple(row["options"]), "answer_words": vocab.words, "answer_labels": vocab.labels}
    return Prompt(segments, clip_id=row["benchmark_clip_id"], meta=meta), vocab
