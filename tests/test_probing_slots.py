"""Probing reads only the audio slots that carry the clip (issue 18, item 1).

Gemma 3n gives every clip 188 audio slots and Voxtral 375 per 30 s chunk; past the clip's own length they hold
padding (Gemma 3n: one shared padding embedding; Voxtral: encoded zeros). Two clips that differ only in their
audio must then differ in every dimension of every representation read at the audio (pre-LLM, audio positions,
pooled audio spans), and at the later tokens the last layer reads, for both families.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.data import open_source
from harness.models.base import split_hidden
from harness.models.hf import carrying_positions
from harness.models.registry import get_model
from harness.prompts import get_variant
from probing import extract as ex

# Slots that carry a 3.5025 s clip (56,040 samples once at 16 kHz), worked out by hand:
# - Gemma 3n: 22 of 188, the issue's own count (transformers' Gemma 3n encoder: 6.25 slots per second, 160 ms
#   each: ceil(3.5025 / 0.16) = 22).
# - Voxtral: mistral-common's AudioConfig.num_audio_tokens: 56,040 / 160 = 350.25 hops -> ceil(350.25 - 1) = 350
#   frames -> ceil(350 / 8) = 44 of the 375 slots of one 30 s chunk.
CARRYING = {"gemma-3n": 22, "voxtral": 44}


@pytest.fixture(scope="module")
def pair() -> list:
    """Two demo rows of one source clip (the same prompt text), different gradient conditions: only audio differs."""
    src = open_source("test", "demo")
    rows = list(src.rows("volume", src.units("volume")[:1]))
    a = rows[0]
    b = next(r for r in rows if r["direction"] != a["direction"] and r["tier"] != a["tier"])
    assert [len(r["audio"]["array"]) / r["audio"]["sampling_rate"] for r in (a, b)] == [3.5025, 3.5025]
    return [a, b]


@pytest.mark.parametrize("family", sorted(CARRYING))
def test_every_audio_representation_depends_on_the_audio(family: str, pair: list) -> None:
    model = get_model(f"tiny-{family}", batch_size=1)
    prompts = [ex.probe_prompt(r, get_variant("default")) for r in pair]
    assert prompts[0].text == prompts[1].text
    hs = split_hidden(model.hidden_states(prompts))
    assert [len(h.audio_positions[0]) for h in hs] == [CARRYING[family]] * 2
    feats = [ex.clip_features(r["audio"], h, None, p.clip_id) for r, h, p in zip(pair, hs, prompts, strict=True)]
    n = hs[0].decoder[0].shape[0] - 1
    at_audio = [k for k in feats[0] if k.startswith(("pre_llm/", "late_llm/", *(f"pos_{q}/" for q in ex.QUARTERS)))]
    assert len(at_audio) == 2 + 4 * len(ex.default_layers(n))
    for key in at_audio:  # every dimension: a padding slot in a pool or a pick would repeat across clips
        same = np.flatnonzero(feats[0][key] == feats[1][key])
        assert same.size == 0, f"{family} {key}: dims {same[:8]} equal for two different clips"
    # the later tokens read at the last layer (the answer position and the last audio quarter's position)
    for key in (f"text/{n}", f"pos_a4/{n}"):
        assert not np.allclose(feats[0][key], feats[1][key], atol=1e-6), key


def test_carrying_positions_keeps_the_first_slots_of_each_clip() -> None:
    positions = np.arange(10, 20)  # two clips of 5 slots each, 2 and 3 carrying
    assert carrying_positions(positions, [(5, 2), (5, 3)]).tolist() == [10, 11, 15, 16, 17]
    from harness.models.protocol import ModelError

    with pytest.raises(ModelError, match="10 audio slots in the prompt, but its clips should take 9"):
        carrying_positions(positions, [(5, 2), (4, 3)], "clip-x")
