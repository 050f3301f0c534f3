"""No silent wrong number from a model (issue 18): a checkpoint of another family is refused before loading,
`--model hf` picks the family from config.json, adapters load from a fine-tuning output folder, model_info names
the weights by sha256, and a run whose rows are mostly errors exits non-zero, marked incomplete."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main as harness
from harness.models.tiny import tiny_checkpoint

# config.json model_type of each family, written out from the transformers docs (model_doc/<name>, the
# "model_type" of each configuration class), not read from the code under test.
MODEL_TYPES = {"qwen2-audio": "qwen2_audio", "audio-flamingo-3": "audioflamingo3", "qwen2.5-omni": "qwen2_5_omni",
               "voxtral": "voxtral", "granite-speech": "granite_speech", "phi-4-multimodal": "phi4_multimodal",
               "gemma-3n": "gemma3n"}
EVAL = ["--configs", "volume", "--source", "demo", "--limit", "4", "--mode", "choices", "--no-preflight"]


def sha256sum_listing(*files: Path) -> str:
    """`sha256sum FILES | sha256sum`, run by the system's coreutils (the documented recipe of the digest)."""
    names = sorted(f.name for f in files)
    listing = subprocess.run(["sha256sum", *names], cwd=files[0].parent, capture_output=True, check=True).stdout
    return hashlib.sha256(listing).hexdigest()


@pytest.fixture(scope="module")
def qwen_folder() -> str:
    return str(tiny_checkpoint("qwen2-audio"))


def test_family_model_types_match_the_docs() -> None:
    from harness.models.families import FAMILIES
    from harness.models.hf import family_model_type

    assert {name: family_model_type(spec) for name, spec in FAMILIES.items()} == MODEL_TYPES


@pytest.mark.parametrize(("model", "other"), [("hf-audio-flamingo-3", "qwen2-audio"), ("hf-qwen2-audio", "audio-flamingo-3"),
                                               ("hf-voxtral", "qwen2-audio"), ("hf-gemma-3n", "qwen2-audio")])
def test_a_checkpoint_of_another_family_is_refused_in_one_line(model: str, other: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()  # config.json alone: refused before any weight (or processor) is read
    (folder / "config.json").write_text(json.dumps({"model_type": MODEL_TYPES[other]}))
    code = harness(["eval", "--model", model, "--model-arg", f"pretrained={folder}", *EVAL, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    want = MODEL_TYPES[model.removeprefix("hf-")]
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"'{MODEL_TYPES[other]}'" in err and f"'{want}'" in err and str(folder) in err
    assert not (tmp_path / "o" / "results.json").exists()


def test_model_hf_picks_the_family_from_model_type(qwen_folder: str, tmp_path: Path) -> None:
    """`--model hf --model-arg pretrained=FOLDER` runs as hf-qwen2-audio: the margins of tiny-qwen2-audio."""
    assert harness(["eval", "--model", "hf", "--model-arg", f"pretrained={qwen_folder}", *EVAL,
                    "--out", str(tmp_path / "auto")]) == 0
    assert harness(["eval", "--model", "tiny-qwen2-audio", *EVAL, "--out", str(tmp_path / "tiny")]) == 0
    auto, tiny = ([json.loads(x) for x in (tmp_path / d / "samples_volume.jsonl").read_text().splitlines()]
                  for d in ("auto", "tiny"))
    assert [r["margin"] for r in auto] == [r["margin"] for r in tiny] and len(auto) == 4
    assert json.loads((tmp_path / "auto" / "results.json").read_text())["model_info"]["family"] == "qwen2-audio"


def test_unknown_model_type_says_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2audio"}))
    code = harness(["eval", "--model", "hf", "--model-arg", f"pretrained={tmp_path}", *EVAL, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "did you mean 'qwen2_audio'" in err, err


@pytest.fixture(scope="module")
def finetune_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vocalgrad-finetune-shaped output folder: the LoRA in OUT/adapter (random, non-zero)."""
    from peft import LoraConfig, get_peft_model

    from harness.models.tiny import build_tiny

    out = tmp_path_factory.mktemp("ft") / "lora-volume"
    base, _ = build_tiny("qwen2-audio")
    lora = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    lora.save_pretrained(out / "adapter")
    return out


def test_model_info_names_the_weights_and_the_adapter(qwen_folder: str, finetune_output: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative pretrained=FOLDER and --adapter OUTPUT_FOLDER (not OUTPUT_FOLDER/adapter): absolute paths, a
    sha256 over the weights and over the adapter, and the adapter the model reports active."""
    local = tmp_path / "my-checkpoint"
    shutil.copytree(qwen_folder, local)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    assert harness(["eval", "--model", "hf-qwen2-audio", "--model-arg", "pretrained=./my-checkpoint",
                    "--adapter", str(finetune_output), *EVAL, "--out", str(out)]) == 0
    info = json.loads((out / "results.json").read_text())["model_info"]
    adapter = finetune_output / "adapter"
    assert info["model_id"] == str(local.resolve()) and info["adapter"] == str(adapter.resolve())
    assert info["weights_sha256"] == sha256sum_listing(local / "model.safetensors")
    assert info["weights_hashed"] == ["model.safetensors"]
    assert info["adapter_sha256"] == sha256sum_listing(adapter / "adapter_model.safetensors")
    assert info["active_adapters"] == ["default"]  # PEFT's name for an adapter loaded without one
    # the same adapter through lm-eval's spelling gives the same answers
    assert harness(["eval", "--model", "hf-qwen2-audio", "--model-arg", "pretrained=./my-checkpoint",
                    "--model-arg", f"peft={finetune_output}", *EVAL, "--out", str(tmp_path / "peft")]) == 0
    rows = [(tmp_path / d / "samples_volume.jsonl").read_text() for d in ("run", "peft")]
    assert rows[0] == rows[1]
    # harness report labels the run by model, checkpoint and adapter, not by its folder
    from harness.report import report

    text = report([out], tmp_path / "report", figures=False)
    assert text.startswith("# VocalGrad report — hf-qwen2-audio (my-checkpoint) + adapter lora-volume\n"), text[:200]


def test_accepts_lists_every_argument(capsys: pytest.CaptureFixture) -> None:
    from harness.models.registry import accepted_arguments, check_model_args

    for name in ("hf-qwen2-audio", "hf", "tiny-gemma-3n"):
        assert {"adapter", "peft", "dtype", "device", "batch_size"} <= set(accepted_arguments(name))
    assert check_model_args("hf", {"pretrained": "a/b", "peft": "c/d"}) == {"model_id": "a/b", "adapter": "c/d"}
    with pytest.raises(ValueError, match="name different adapters"):
        check_model_args("hf-qwen2-audio", {"pretrained": "a/b", "peft": "x/y", "adapter": "z/w"})
    with pytest.raises(FileNotFoundError, match="expected adapter_config.json there or in"):
        from harness.models.registry import resolve_adapter

        resolve_adapter("./no-such-adapter")


def test_modality_rule_on_every_family_processor() -> None:
    """The sub-processor kind of each attribute, written out from the processors' __init__ signatures."""
    import transformers

    from harness.models.frontends import modality_of

    processors = ("Qwen2AudioProcessor", "AudioFlamingo3Processor", "Qwen2_5OmniProcessor", "VoxtralProcessor",
                  "GraniteSpeechProcessor", "Phi4MultimodalProcessor", "Gemma3nProcessor")
    want = {"feature_extractor": "feature_extractor", "tokenizer": "tokenizer", "image_processor": "image_processor",
            "video_processor": "video_processor", "audio_processor": "audio_processor",
            "encoder_image_processor": "image_processor", "text_tokenizer": "tokenizer"}
    for name in processors:
        for attribute in getattr(transformers, name).get_attributes():
            assert modality_of(attribute) == want[attribute], (name, attribute)
    assert modality_of("encoder_image_processor") == "image_processor" and modality_of("text_tokenizer") == "tokenizer"
    with pytest.raises(ValueError, match="sub-processor kind"):
        modality_of("speaker_embeddings")


FAILING = '''
from harness.models.baselines import AlwaysIncrease
from harness.models.protocol import ModelError


class Flaky(AlwaysIncrease):
    """Fails on every clip whose id sorts into the first `share` of a hash bucket."""

    name = "flaky"

    def __init__(self, fail_every=3, **kwargs):
        super().__init__(**kwargs)
        self.fail_every = fail_every

    def generate_items(self, prompts, *, max_new_tokens=128):
        out = super().generate_items(prompts, max_new_tokens=max_new_tokens)
        return [ModelError("CUDA error: device-side assert", p.clip_id) if i % self.fail_every == 0 else o
                for i, (p, o) in enumerate(zip(prompts, out))]
'''


def test_a_run_that_mostly_failed_exits_non_zero_and_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "flaky_model.py").write_text(FAILING)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    args = ["eval", "--model", "flaky_model:Flaky", "--configs", "volume", "--source", "demo", "--batch-size", "6",
            "--no-preflight", "--out", str(out)]
    code = harness(args)
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if not line.startswith("[rank 0]")]  # progress bar lines
    assert code == 2 and len(errors) == 1 and errors[0].startswith("error: ") and "Traceback" not in captured.err
    # 72 clips in batches of 6, every third of a batch fails: 2 per batch, 24 of 72 rows
    assert "24 of 72 rows are errors (33.3 % > 10 %)" in captured.err and "CUDA error: device-side assert" in captured.err
    assert "| volume |" in captured.out  # the per-config table is printed all the same
    results = json.loads((out / "results.json").read_text())
    assert results["incomplete"].startswith("24 of 72 rows are errors")
    assert results["metrics"]["volume"]["n_error"] == 24
    # the leaderboard refuses it, even with the flag removed and the threshold raised in the record
    sub = tmp_path / "sub.json"
    assert harness(["leaderboard", "submit", str(out), "--model-name", "x", "--out", str(sub)]) == 1
    assert "the run is incomplete: 24 of 72 rows are errors" in capsys.readouterr().err and not sub.exists()
    results["incomplete"], results["config"]["max_error_rate"] = None, 1.0
    (out / "results.json").write_text(json.dumps(results))
    assert harness(["leaderboard", "submit", str(out), "--model-name", "x", "--out", str(sub)]) == 1
    assert "the run is incomplete: 24 of 72 rows are errors" in capsys.readouterr().err and not sub.exists()
    # the threshold is the user's: 40 % lets this run pass
    assert harness([*args[:-2], "--max-error-rate", "0.4", "--out", str(tmp_path / "ok")]) == 0


def test_tasks_is_configs_and_eval_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert harness(["eval", "--model", "always-increase", "--tasks", "volume,noise", "--source", "demo", "--limit", "8",
                    "--no-preflight", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    results = json.loads((tmp_path / "results.json").read_text())
    assert list(results["metrics"]) == ["volume", "noise"]
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert table[0] == "| config | accuracy % | 95% CI | n | unparsed | errors |"
    m = results["metrics"]["volume"]
    # always "increase" on a stratified half-up, half-down sample: 4 of 8 right
    assert m["n_correct"] == 4 and table[2] == (f"| volume | 50.0 | [{100 * m['accuracy_ci_low']:.1f}, "
                                                f"{100 * m['accuracy_ci_high']:.1f}] | 8 | 0 | 0 |")


def test_audio_flamingo_3_paper_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ynklab/vocalgrad plic/kimi_common.py AudioModelRuntime: AudioFlamingo3ForConditionalGeneration.from_pretrained(
    id, device_map="auto") with no dtype (transformers 5: config.json's dtype) and generate(**inputs,
    max_new_tokens=..., do_sample=False): the checkpoint's generation config otherwise as it is."""
    from harness.models.protocol import AudioClip, Prompt
    from harness.models.registry import get_model

    folder = tmp_path / "af3"
    shutil.copytree(tiny_checkpoint("audio-flamingo-3"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["dtype"] = "bfloat16"  # as a checkpoint saved in bfloat16 says
    (folder / "config.json").write_text(json.dumps(config))
    seen: dict[str, object] = {}
    prompt = Prompt(("Does the volume increase or decrease?", AudioClip(np.zeros(8000, dtype=np.float32), 16000)))
    for protocol in ("paper", "card"):
        lm = get_model("hf-audio-flamingo-3", model_id=str(folder), device="cpu",
                       **({"protocol": protocol} if protocol == "card" else {}))
        lm.model.generation_config.repetition_penalty = 1.3  # a checkpoint's own setting
        monkeypatch.setattr(lm.model, "generate",
                            lambda lm=lm, **kw: seen.__setitem__(lm.protocol, kw["generation_config"]) or kw["input_ids"])
        lm.generate([prompt], max_new_tokens=5)
        assert lm.provenance()["protocol"] == protocol
        seen[f"{protocol} dtype"] = lm.provenance()["dtype"]
    assert seen["paper dtype"] == "bfloat16" and seen["card dtype"] == "float32"
    paper, card = seen["paper"], seen["card"]
    assert (paper.do_sample, paper.repetition_penalty, paper.max_new_tokens) == (False, 1.3, 5)
    assert (card.do_sample, card.repetition_penalty, card.num_beams) == (False, None, 1)
    with pytest.raises(Exception, match="was not evaluated in the paper"):
        get_model("tiny-qwen2-audio", protocol="paper")
