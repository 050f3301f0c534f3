"""Registry, weight-free baselines and the optional-runtime wrappers."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import types

import numpy as np
import pytest

from harness.models.base import ModelError
from harness.models.external import MissingDependency
from harness.models.families import FAMILIES
from harness.models.protocol import AudioClip, AudioLM, Prompt
from harness.models.registry import get_model, list_models, registry

EXPECTED = {
    "signal-oracle", "always-increase", "random", "transcript-reader", "mcq-signal-oracle", "tiny-qwen2-audio", "tiny-audio-flamingo-3", "audio-flamingo-3",
    "qwen2-audio-7b-instruct", "qwen2.5-omni-7b", "voxtral-mini-3b", "granite-speech-3.3-8b", "phi-4-multimodal",
    "gemma-3n-e4b", "tiny-qwen2.5-omni", "tiny-voxtral", "tiny-granite-speech", "tiny-phi-4-multimodal",
    "tiny-gemma-3n", "kimi-audio", "mimo-audio", "step-audio-2-mini", "gemini-3-flash", "gpt-4o-audio",
    "openai-compatible",
    "whisper-tiny-en", "hf", *(f"hf-{family}" for family in FAMILIES),
}
CLIP = AudioClip(np.zeros(16000, dtype=np.float32), 16000)


def _prompt(clip_id: str, **meta) -> Prompt:
    return Prompt(("Does the volume increase or decrease over time?", CLIP), clip_id=clip_id, meta=meta)


def test_list_models_rows():
    rows = list_models()
    assert {r[0] for r in rows} == EXPECTED and len(rows) == len(EXPECTED)
    assert all(kind in {"baseline", "tiny", "hf", "external", "api", "encoder"} and desc for _, kind, desc in rows)


def test_unknown_name_suggests_close_matches():
    with pytest.raises(KeyError, match="did you mean 'qwen2-audio-7b-instruct'"):
        get_model("qwen2-audio-7b-instuct")
    with pytest.raises(KeyError, match="unknown model 'zzz'"):
        get_model("zzz")


def test_registry_import_is_light():
    code = ("import sys, harness.models.registry as r; r.list_models(); "
            "print(any(m in sys.modules for m in ('torch', 'transformers', 'accelerate')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_always_increase_and_choice_mapping():
    lm = get_model("always-increase")
    assert isinstance(lm, AudioLM) and lm.name == "always-increase"
    assert lm.generate([_prompt("a"), _prompt("b")]) == ["increase", "increase"]
    # Swapped order and synonym vocabularies map by answer family, not by position.
    np.testing.assert_array_equal(lm.score_choices([_prompt("a")], ("decrease", "increase")), [[-1.0, 1.0]])
    np.testing.assert_array_equal(lm.score_choices([_prompt("a")], ("rise", "fall")), [[1.0, -1.0]])


def test_random_is_seeded_per_category_and_clip_id():
    lm = get_model("random")
    ids = [f"p226_01__p226_106__linear__low__{i}" for i in range(200)]
    answers = lm.generate([_prompt(i, category="volume") for i in ids])
    expected = []
    for i in ids:
        seed = int.from_bytes(hashlib.sha256(f"1234:volume:{i}".encode()).digest()[:8], "big")
        expected.append("increase" if np.random.default_rng(seed).random() < 0.5 else "decrease")
    assert answers == expected
    assert 70 < answers.count("increase") < 130
    # Independent of batch composition and order.
    assert get_model("random", batch_size=3).generate([_prompt(i, category="volume") for i in ids[::-1]]) == answers[::-1]
    assert get_model("random", seed=7).generate([_prompt(i, category="volume") for i in ids]) != answers
    assert lm.generate([_prompt(i, category="pitch") for i in ids]) != answers  # each category draws anew


def test_signal_oracle_calls_predict_with_meta(monkeypatch):
    calls = []

    def predict(category, audio, sr, onset, offset):
        calls.append((category, audio.shape, sr, onset, offset))
        return ("decrease", 0.4) if category == "pitch" else ("increase", -2.0)

    monkeypatch.setitem(sys.modules, "vocalgrad_dataset.oracle", types.SimpleNamespace(predict=predict))
    lm = get_model("signal-oracle")
    p1 = _prompt("x", category="pitch", onset_sec=0.1234, offset_sec=0.9)
    p2 = _prompt("y", category="volume", onset_sec=0.0, offset_sec=5.0)  # offset clamped to the clip
    assert lm.generate([p1, p2]) == ["decrease", "increase"]
    assert calls[:2] == [("pitch", (16000,), 16000, 1974, 14400), ("volume", (16000,), 16000, 0, 16000)]
    np.testing.assert_allclose(lm.score_choices([p1, p2], ("increase", "decrease")), [[-0.4, 0.4], [2.0, -2.0]])
    (item,) = lm.generate_items([_prompt("z")])
    assert isinstance(item, ModelError) and "category" in item.message and item.clip_id == "z"


@pytest.mark.parametrize(
    ("name", "kwargs", "needle"),
    [
        ("kimi-audio", {"trust_remote_code": True}, "pip install"),
        ("mimo-audio", {}, "MiMo-Audio"),
        ("step-audio-2-mini", {"trust_remote_code": True}, "pip install"),
    ],
)
def test_external_runtimes_explain_how_to_install(name, kwargs, needle):
    with pytest.raises(MissingDependency, match=needle):
        get_model(name, **kwargs)


@pytest.mark.parametrize("name", ["kimi-audio", "step-audio-2-mini"])
def test_remote_code_needs_explicit_consent(name):
    with pytest.raises(ModelError, match="trust_remote_code=True"):
        get_model(name)


def test_every_hf_entry_names_a_real_transformers_class():
    import transformers

    from harness.models.families import FAMILIES

    exported = set(dir(transformers))  # the lazy module lists names without importing every model
    for spec in FAMILIES.values():
        assert spec.model_class in exported, spec.model_class
        assert spec.processor_class in exported, spec.processor_class
    assert {e.name for e in registry().values() if e.kind == "hf" and not e.name.startswith("hf")} == {
        "audio-flamingo-3", "qwen2-audio-7b-instruct", "qwen2.5-omni-7b", "voxtral-mini-3b",
        "granite-speech-3.3-8b", "phi-4-multimodal", "gemma-3n-e4b"}


def test_model_args_are_checked_against_the_factory_before_anything_loads():
    from harness.models.registry import accepted_arguments, check_model_args

    accepted = accepted_arguments("qwen2-audio-7b-instruct")
    assert {"model_id", "pretrained", "revision", "dtype", "trust_remote_code", "fast_encoder"} <= set(accepted)
    with pytest.raises(ValueError, match=r"^model 'qwen2-audio-7b-instruct' does not take --model-arg no_such_arg; "
                                         r"it accepts: adapter, attn_implementation, batch_size, device, .*peft, pretrained, "
                                         r"protocol, revision"):
        check_model_args("qwen2-audio-7b-instruct", {"no_such_arg": 1})
    # lm-eval's word for the checkpoint; a fine-tuned or merged checkpoint of the family, no TypeError
    assert check_model_args("qwen2-audio-7b-instruct", {"pretrained": "org/ft", "revision": "abc"}) == {
        "model_id": "org/ft", "revision": "abc"}
    with pytest.raises(ValueError, match="needs a checkpoint: --model-arg pretrained=ORG/ID"):
        check_model_args("hf-qwen2-audio", {})
    with pytest.raises(FileNotFoundError, match="no checkpoint folder at /no/such/dir"):
        check_model_args("hf-qwen2-audio", {"pretrained": "/no/such/dir"})
    with pytest.raises(ValueError, match="name different checkpoints"):
        check_model_args("hf-qwen2-audio", {"pretrained": "a/b", "model_id": "c/d"})
    # factories that forward **kwargs to a base class list the base's keywords too
    assert {"model_path", "trust_remote_code", "seed"} <= set(accepted_arguments("kimi-audio"))
    assert "model_id" not in accepted_arguments("tiny-qwen2-audio")  # a tiny model builds its own weights


def test_unknown_model_arg_is_one_line_at_the_command_line(tmp_path, capsys):
    from harness.cli import main

    rc = main(["eval", "--model", "qwen2-audio-7b-instruct", "--model-arg", "no_such_arg=1", "--configs", "volume",
               "--source", "demo", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "it accepts:" in err and "Traceback" not in err


def test_any_checkpoint_of_a_family_runs_through_the_per_family_entry(tmp_path):
    """A fine-tuned, merged or private checkpoint: `--model hf-<family> --model-arg pretrained=PATH` (lm-eval's
    spelling), or the published entry with `model_id=PATH`; results.json names the checkpoint that ran."""
    import json

    from harness.cli import main
    from harness.models.tiny import tiny_checkpoint

    folder = str(tiny_checkpoint("qwen2-audio"))
    for model, arg in (("hf-qwen2-audio", f"pretrained={folder}"), ("qwen2-audio-7b-instruct", f"model_id={folder}")):
        out = tmp_path / model
        assert main(["eval", "--model", model, "--model-arg", arg, "--model-arg", "revision=null", "--configs",
                     "volume", "--source", "demo", "--limit", "4", "--mode", "choices", "--out", str(out)]) == 0
        results = json.loads((out / "results.json").read_text())
        info = results["model_info"]
        assert info["model_id"] == folder and info["family"] == "qwen2-audio" and info["dtype"] == "float32"
        assert info["device"] == "cpu" and set(info["versions"]) == {"torch", "transformers", "vocalgrad"}
        assert results["metrics"]["volume"]["n"] == 4 and folder in results["config"]["model_args"].values()
