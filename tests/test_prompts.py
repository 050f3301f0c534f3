"""Prompt variants of SPEC §5: exact texts, segment order, vocabularies, name errors."""

from __future__ import annotations

import numpy as np
import pytest

from harness.data import CONFIGS, attribute_word
from harness.models.protocol import AudioClip
from harness.parsing import MAIN, SYNONYM
from harness.prompts import build_prompt, get_variant, variant_names

ANSWER = 'Answer with only one word: "increase" or "decrease".'


def _row(category: str = "volume", attribute: str | None = None) -> dict:
    return {
        "audio": {"array": np.zeros(160, dtype=np.float32), "sampling_rate": 16000},
        "benchmark_clip_id": "p226_01__p226_106__linear__low__up",
        "category": category,
        "attribute": attribute or attribute_word(category),
        "label": "increase",
        "onset_sec": 0.5,
        "offset_sec": 1.5,
        "duration_sec": 2.0,
    }


def test_attribute_words_match_spec_table() -> None:
    words = [attribute_word(c) for c in CONFIGS]
    assert words == [
        "speaking speed", "voice pitch", "volume", "audio distortion", "audio roughness",
        "background noise", "echo", "voice clarity", "voice vibration",
    ]  # fmt: skip


def test_default_prompt_text_before_audio() -> None:
    prompt, vocab = build_prompt(_row("pitch"), "default")
    assert isinstance(prompt.segments[1], AudioClip) and isinstance(prompt.segments[0], str)
    assert prompt.segments[0] == f"Does the voice pitch increase or decrease over time?\n\n{ANSWER}"
    assert prompt.text.endswith("<audio>")
    assert prompt.clip_id == "p226_01__p226_106__linear__low__up"
    assert vocab.choices == ("increase", "decrease") and vocab.parser is MAIN
    assert prompt.segments[0] == f"Does the voice pitch increase or decrease over time?\n\n{ANSWER}"  # as stored in rows


def test_meta_for_baselines_has_no_label() -> None:
    prompt, _ = build_prompt(_row(), "default")
    assert prompt.meta == {"category": "volume", "onset_sec": 0.5, "offset_sec": 1.5, "duration_sec": 2.0,
                           "answer_words": ("increase", "decrease"), "answer_labels": ("increase", "decrease")}


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("swap_order", 'Does the echo decrease or increase over time?\n\nAnswer with only one word: "decrease" or "increase".'),
        ("audio_ref", f"Does the echo of this audio clip increase or decrease over time?\n\n{ANSWER}"),
        ("swap_order+audio_ref", 'Does the echo of this audio clip decrease or increase over time?\n\n'
                                 'Answer with only one word: "decrease" or "increase".'),
        ("audio_first", f"Does the echo increase or decrease over time?\n\n{ANSWER}"),
        ("cross-attribute:pitch", f"Does the voice pitch increase or decrease over time?\n\n{ANSWER}"),
        ("cross-attribute:voice_clarity", f"Does the voice clarity increase or decrease over time?\n\n{ANSWER}"),
    ],
)
def test_variant_texts(name: str, text: str) -> None:
    prompt, vocab = build_prompt(_row("echo"), name)
    texts = [s for s in prompt.segments if isinstance(s, str)]
    assert texts == [text]
    # swapping the order never changes which column of score_choices means "increase"
    assert vocab.choices == ("increase", "decrease")


def test_audio_first_puts_audio_first() -> None:
    prompt, _ = build_prompt(_row(), "audio_first")
    assert isinstance(prompt.segments[0], AudioClip)
    assert prompt.text.startswith("<audio>Does the volume")


def test_modifier_order_is_canonical() -> None:
    assert get_variant("audio_ref+swap_order").name == "swap_order+audio_ref"
    assert get_variant("audio_first+cross-attribute:noise").name == "cross-attribute:noise+audio_first"
    assert len(set(variant_names())) == len(variant_names())
    for name in variant_names():
        assert get_variant(name).name == name


@pytest.mark.parametrize(
    ("category", "index", "question", "words"),
    [
        ("volume", 1, "Does the loudness rise or fall as the audio progresses?", ("rise", "fall")),
        ("volume", 3, "Is the audio intensity increasing or decreasing over time?", ("increasing", "decreasing")),
        ("pitch", 2, "Does the sound frequency change upward or downward over time?", ("upward", "downward")),
        ("pitch", 3, "Over time, does the frequency of the voice rise or decline?", ("rise", "decline")),
        ("speed", 1, "Does the pace of speech become faster or slower over time?", ("faster", "slower")),
        ("speed", 2, "Does the speech tempo increase or decrease with time?", ("increase", "decrease")),
        ("speed", 3, "Does the pace of delivery accelerate or decelerate over time?", ("accelerate", "decelerate")),
    ],
)
def test_paraphrases(category: str, index: int, question: str, words: tuple[str, str]) -> None:
    prompt, vocab = build_prompt(_row(category), f"paraphrase-{index}")
    assert prompt.segments[0] == f'{question}\n\nAnswer with only one word: "{words[0]}" or "{words[1]}".'
    assert vocab.choices == words
    assert vocab.parser is SYNONYM  # the published paraphrase parser, also for increase/decrease wording


def test_paraphrase_limits() -> None:
    with pytest.raises(ValueError, match="only for volume, pitch, speed"):
        build_prompt(_row("echo"), "paraphrase-1")
    with pytest.raises(ValueError, match="combine only with audio_first"):
        get_variant("paraphrase-1+swap_order")
    assert isinstance(build_prompt(_row(), "paraphrase-2+audio_first")[0].segments[0], AudioClip)


@pytest.mark.parametrize(
    ("name", "hint"),
    [("swap-order", "swap_order"), ("defualt", "default"), ("paraphrase-4", "paraphrase-"),
     ("cross-attribute:nosie", "cross-attribute:noise"), ("audio_ref+audio_ref2", "audio_ref")],
)
def test_unknown_names_suggest(name: str, hint: str) -> None:
    with pytest.raises(ValueError, match=f"did you mean '{hint}"):
        get_variant(name)


def test_few_shot_needs_its_train_pool() -> None:
    # few-shot is implemented (tests/test_variants.py); unresolved, it refuses instead of dropping the examples
    assert get_variant("audio_ref+few-shot").name == "few-shot+audio_ref"
    with pytest.raises(ValueError, match="needs train examples"):
        build_prompt(_row(), "few-shot+audio_ref")
