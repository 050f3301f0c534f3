"""Multiple-choice rows (the multiple-choice declaration of harness.kinds.choice): the row shape, its checks, and the lettered prompt.

An MCQ row has audio, a question, 2-4 options, the true answer (`answer`, y_true) and optionally the label
the transcript asserts (`adversarial`, y_adv), plus the task it belongs to. Answers are option texts; the
prompt letters them A-D and the parser (harness.parsing.OptionParser) reads a letter or an option's text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.audio import input_clip
from harness.models.protocol import Prompt
from harness.parsing import LETTERS, Vocabulary, mcq_vocabulary

MCQ_FIELDS: tuple[str, ...] = ("question", "options", "answer", "adversarial", "task")
ANSWER_INSTRUCTION = "Answer with the letter of the correct option."


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
    options = [o.strip() for o in value]
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
    if len(text) == 1 and text.upper() in LETTERS[: len(options)]:
        return options[LETTERS.index(text.upper())]
    raise ValueError(f"{where}: {field} {value!r} is not one of its options {options}")


def _answer_texts(value: Any) -> list[str]:
    """The texts an answer cell may stand for: itself, and a whole float (2.0 from a CSV) as "2"."""
    if value is None or isinstance(value, bool):
        return [] if value is None else [str(value)]
    texts = [str(value).strip()]
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        texts.append(str(int(value)))
    return texts


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
    adversarial = row.get("adversarial")
    if adversarial is not None and str(adversarial).strip():
        adversarial = option_answer(adversarial, options, where, "adversarial")
        if adversarial == answer:
            raise ValueError(f"{where}: adversarial label equals the answer {answer!r}")
    else:
        adversarial = None
    duration = row.get("duration_sec")
    return {
        "audio": row["audio"], "benchmark_clip_id": cid, "category": config, "kind": kind,
        "question": question.strip(), "options": options, "answer": answer, "adversarial": adversarial,
        "task": str(row.get("task") or config), "label": answer,
        "source_clip_id": str(row.get("source_clip_id") or cid),
        "duration_sec": float(duration) if duration not in (None, "") else float("nan"),
    }  # fmt: skip


def mcq_text(question: str, options: Sequence[str]) -> str:
    """The question, its lettered options one per line, and the answer instruction."""
    lines = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))
    return f"{question}\n\n{lines}\n\n{ANSWER_INSTRUCTION}"


def mcq_prompt(row: Mapping[str, Any], variant: Any) -> tuple[Prompt, Vocabulary]:
    """The Prompt of one MCQ row (text before audio unless the variant is audio_first) and its vocabulary."""
    vocab = mcq_vocabulary(row["options"])
    audio = input_clip(row)
    text = mcq_text(row["question"], row["options"])
    segments = (audio, text) if getattr(variant, "audio_first", False) else (text, audio)
    # Baselines read these; y_true and y_adv are deliberately absent.
    meta = {"category": row["category"], "task": row.get("task"), "question": row["question"],
            "options": tuple(row["options"]), "answer_words": vocab.words, "answer_labels": vocab.labels}
    return Prompt(segments, clip_id=row["benchmark_clip_id"], meta=meta), vocab
