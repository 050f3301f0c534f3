"""Kimi-Audio, MiMo-Audio and Step-Audio 2 mini against small fakes of their runtimes.

The runtimes cannot be installed here (not on PyPI, Hub remote code, CUDA-only), so each fake mirrors
the official entry point's signature and records what the wrapper hands it: the exact messages (with
the audio read back from the file the runtime would load), the generation keyword arguments, the token
budget and the random draw of sampling runtimes.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from harness.models.base import ModelError
from harness.models.external import KimiAudio, MiMoAudio, StepAudio2Mini, hub_commit
from harness.models.protocol import AudioClip, Prompt
from harness.prompts import get_variant
from harness.runner import EvalSettings, evaluate_batch

QUESTION = 'Does the volume increase or decrease over time?\n\nAnswer with only one word: "increase" or "decrease".'
EXPERT = ("You are an expert in audio analysis, please analyze the audio content and answer the questions "
          "accurately.")
# The README's sampling_params of Kimi-Audio, written out from the README, not read from the wrapper.
KIMI_README_SAMPLING = {
    "audio_temperature": 0.8, "audio_top_k": 10, "text_temperature": 0.0, "text_top_k": 5,
    "audio_repetition_penalty": 1.0, "audio_repetition_window_size": 64,
    "text_repetition_penalty": 1.0, "text_repetition_window_size": 16,
}


def _clip(seconds: float = 0.5, sr: int = 48000) -> AudioClip:
    x = (0.25 * np.sin(np.arange(int(seconds * sr)) / 7)).astype(np.float32)
    return AudioClip(x, sr)


def _prompt(clip_id: str = "c1", audio_first: bool = False, n_audios: int = 1) -> Prompt:
    audios = [_clip(0.5 + 0.25 * i) for i in range(n_audios)]
    segments = (*audios, QUESTION) if audio_first else (QUESTION, *audios)
    return Prompt(tuple(segments), clip_id=clip_id)


def _heard(path: str) -> tuple[int, int, float]:
    """(sampling rate, samples, peak) of the WAV the runtime was given, read while it still exists."""
    data, sr = sf.read(path, dtype="float32")
    return sr, len(data), round(float(np.abs(data).max()), 3)


def _weights(device: str = "cuda:0") -> types.SimpleNamespace:
    return types.SimpleNamespace(dtype=torch.bfloat16, device=torch.device(device))


def _install(monkeypatch: pytest.MonkeyPatch, name: str, file: Path | None = None, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = str(file or Path("/nonexistent") / (name.replace(".", "/") + ".py"))
    for key, value in attrs.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)
    return module


# ---- Kimi-Audio ---------------------------------------------------------------------------------------
class FakeKimiAudio:
    """kimia_infer.api.kimia.KimiAudio: same constructor and generate() signature as the official one."""

    made: list[dict] = []

    def __init__(self, model_path: str, load_detokenizer: bool = True) -> None:
        FakeKimiAudio.made.append({"model_path": model_path, "load_detokenizer": load_detokenizer})
        self.alm = _weights()
        self.calls: list[dict] = []

    def generate(self, chats, output_type="text", audio_temperature=0.0, audio_top_k=5, text_temperature=0.0,
                 text_top_k=5, audio_repetition_penalty=1.0, audio_repetition_window_size=64,
                 text_repetition_penalty=1.0, text_repetition_window_size=16, max_new_tokens=-1):
        kwargs = {k: v for k, v in locals().items() if k not in ("self", "chats")}
        heard = [{**m, "content": _heard(m["content"]) if m["message_type"] == "audio" else m["content"]}
                 for m in chats]
        self.calls.append({"chats": heard, "kwargs": kwargs})
        return None, "increase"


class OldKimiAudio(FakeKimiAudio):
    def generate(self, chats, output_type="text", text_temperature=0.0):  # a checkout without a budget
        return None, "increase"


@pytest.fixture
def kimi(monkeypatch):
    FakeKimiAudio.made.clear()
    return _install(monkeypatch, "kimia_infer.api.kimia", KimiAudio=FakeKimiAudio)


def test_kimi_messages_sampling_and_budget(kimi):
    lm = KimiAudio(trust_remote_code=True, protocol="card")
    assert FakeKimiAudio.made == [{"model_path": "moonshotai/Kimi-Audio-7B-Instruct", "load_detokenizer": False}]
    assert lm.generate([_prompt("a")], max_new_tokens=128) == ["increase"]
    lm.generate([_prompt("a", audio_first=True)], max_new_tokens=256)
    first, retry = lm.runtime.calls
    # README ASR example layout: one user message per segment, in the prompt's order, audio as a file path
    assert first["chats"] == [
        {"role": "user", "message_type": "text", "content": QUESTION},
        {"role": "user", "message_type": "audio", "content": (48000, 24000, 0.25)},
    ]
    assert first["kwargs"] == {**KIMI_README_SAMPLING, "output_type": "text", "max_new_tokens": 128}
    assert [m["message_type"] for m in retry["chats"]] == ["audio", "text"]
    assert retry["kwargs"]["max_new_tokens"] == 256


def test_kimi_refuses_without_remote_code_consent_and_without_a_budget(kimi, monkeypatch):
    with pytest.raises(ModelError, match="trust_remote_code=True"):
        KimiAudio()
    assert FakeKimiAudio.made == []  # refused before anything was loaded
    monkeypatch.setattr(kimi, "KimiAudio", OldKimiAudio)
    with pytest.raises(ModelError, match="takes no 'max_new_tokens'"):
        KimiAudio(trust_remote_code=True)


def test_kimi_provenance_and_pinned_revision(kimi, monkeypatch, tmp_path):
    import huggingface_hub

    sha = "0123456789abcdef0123456789abcdef01234567"
    snapshot = tmp_path / "models--moonshotai--Kimi-Audio-7B-Instruct" / "snapshots" / sha
    snapshot.mkdir(parents=True)
    downloads = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda repo, revision=None: downloads.append((repo, revision)) or str(snapshot))
    lm = KimiAudio(trust_remote_code=True, revision="v1.0", seed=99)
    assert downloads == [("moonshotai/Kimi-Audio-7B-Instruct", "v1.0")]
    assert FakeKimiAudio.made[-1]["model_path"] == str(snapshot)  # the runtime loads the pinned snapshot
    info = lm.provenance()
    assert info["model_id"] == "moonshotai/Kimi-Audio-7B-Instruct" and info["revision"] == "v1.0"
    assert (info["dtype"], info["device"]) == ("bfloat16", "cuda:0")
    assert info["runtime"] == "kimia_infer.api.kimia" and info["runs_remote_code"] is True
    assert info["generation"]["text_temperature"] == 0.0 and info["seed"] == 99
    json.dumps(info)
    with pytest.raises(ModelError, match="local folder"):
        KimiAudio(trust_remote_code=True, model_path=str(snapshot), revision="v1.0")
    local = KimiAudio(trust_remote_code=True, model_path=str(snapshot))  # a snapshot folder names its commit
    assert local.provenance()["commit"] == sha and local.provenance()["model_id"] == str(snapshot)


# ---- MiMo-Audio ---------------------------------------------------------------------------------------
class FakeSampler:
    def __init__(self, do_sample: bool = True, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float = 1.0) -> None:
        self.do_sample, self.temperature, self.top_k, self.top_p = do_sample, temperature, top_k, top_p


class FakeStopper:
    made: list[dict] = []

    def __init__(self, stop_tokens, group_size, audio_channels, max_length=None, min_length=None) -> None:
        FakeStopper.made.append({"stop_tokens": stop_tokens, "group_size": group_size,
                                 "audio_channels": audio_channels})


class FakeMimoAudio:
    """src.mimo_audio.mimo_audio.MimoAudio: the two steps of audio_understanding_sft, and a sampler."""

    def __init__(self, model_path: str, mimo_audio_tokenizer_path: str, device: str | None = None) -> None:
        self.paths = (model_path, mimo_audio_tokenizer_path)
        self.tokenizer = types.SimpleNamespace(eos_token_id=151643)
        self.im_end_idx, self.group_size, self.audio_channels = 151645, 4, 8
        self.model = torch.nn.Linear(2, 2).to(torch.bfloat16)  # a module without .dtype/.device of its own
        # other values than the published ones: the wrapper must pin them
        self.task_sampler_configs = {"audio_understanding": {"global": FakeSampler(True, 0.6, 50, 1.0),
                                                             "local": FakeSampler(True, 0.9, None, 0.95)}}
        self.prompts: list[dict] = []
        self.forwards: list[dict] = []

    def get_audio_understanding_sft_prompt(self, input_speech, input_text, thinking=False):
        self.prompts.append({"audio": _heard(input_speech), "text": input_text, "thinking": thinking})
        return torch.zeros((9, 12), dtype=torch.int64)

    def forward(self, input_ids, return_audio=False, output_audio_path=None, stopping_criteria=None,
                min_new_tokens=0, max_new_tokens=8192, add_history=False, task_name=None):
        kwargs = {k: v for k, v in locals().items() if k not in ("self", "input_ids", "stopping_criteria")}
        sampler = self.task_sampler_configs[task_name]["global"]
        draw = int(torch.randint(0, 2**31 - 1, (1,)).item())  # stands for the sampled tokens
        self.forwards.append({**kwargs, "stoppers": len(stopping_criteria or []), "draw": draw,
                              "sampler": (sampler.do_sample, sampler.temperature, sampler.top_p)})
        return f"hmm {draw}"  # never parses: the runner retries


@pytest.fixture
def mimo(monkeypatch):
    FakeStopper.made.clear()
    return _install(monkeypatch, "src.mimo_audio.mimo_audio", MimoAudio=FakeMimoAudio, MiMoStopper=FakeStopper)


def test_mimo_passes_the_budget_and_its_understanding_template(mimo):
    lm = MiMoAudio()  # the runtime is the cloned repository's code: no remote-code consent needed
    assert lm.runtime.paths == ("XiaomiMiMo/MiMo-Audio-7B-Instruct", "XiaomiMiMo/MiMo-Audio-Tokenizer")
    lm.generate([_prompt("a")], max_new_tokens=128)
    lm.generate([_prompt("a")], max_new_tokens=256)
    (p1, p2), (f1, f2) = lm.runtime.prompts, lm.runtime.forwards
    assert p1 == p2 == {"audio": (48000, 24000, 0.25), "text": QUESTION, "thinking": False}  # clip, then text
    assert {k: f1[k] for k in ("max_new_tokens", "task_name", "return_audio", "add_history", "stoppers")} == {
        "max_new_tokens": 128, "task_name": "audio_understanding", "return_audio": False, "add_history": False,
        "stoppers": 1}
    assert f2["max_new_tokens"] == 256  # not the runtime's default of 8192
    assert FakeStopper.made[0] == {"stop_tokens": [151643, 151645], "group_size": 4, "audio_channels": 8}
    assert f1["sampler"] == (True, 0.3, 0.95)  # audio_understanding sampler pinned to the published values


def test_mimo_retry_draws_a_new_sample_reproducibly_and_order_free(mimo):
    def draws(prompts, budget, seed=1234):
        lm = MiMoAudio(seed=seed, protocol="card")
        lm.generate(prompts, max_new_tokens=budget)
        return {p.clip_id: f["draw"] for p, f in zip(prompts, lm.runtime.forwards, strict=True)}

    a, b = _prompt("a"), _prompt("b")
    first = draws([a, b], 128)
    assert draws([b, a], 128) == first  # batch order does not change a clip's sample
    assert draws([a], 128) == {"a": first["a"]}  # nor does what else was asked
    retry = draws([a, b], 256)
    assert retry["a"] != first["a"] and retry["b"] != first["b"]  # the retry is a new sample
    assert draws([a], 128, seed=5)["a"] != first["a"]  # and --seed changes it

    # the documented seed, computed here: torch's first draw after manual_seed(sha256(...) % 2**31)
    torch.manual_seed(int.from_bytes(hashlib.sha256(b"1234:a:128").digest()[:8], "big") % 2**31)
    assert first["a"] == int(torch.randint(0, 2**31 - 1, (1,)).item())


def test_mimo_retry_through_the_runner(mimo):
    row = {"audio": {"array": _clip().array, "sampling_rate": 48000}, "category": "volume",
           "benchmark_clip_id": "p901_01__p901_101__jump__low__up", "label": "increase", "tier": "low",
           "curve": "jump", "direction": "up", "source_clip_id": "p901_101"}
    lm = MiMoAudio(protocol="card")
    (out,) = evaluate_batch(lm, [row], get_variant("default"), EvalSettings("mimo-audio", ["volume"], "x"))
    first, retry = lm.runtime.forwards
    assert (first["max_new_tokens"], retry["max_new_tokens"]) == (128, 256)  # the runner's budgets arrive
    assert out["retried"] is True and out["raw"] == f"hmm {retry['draw']}" and retry["draw"] != first["draw"]


def test_mimo_takes_one_clip_and_reports_its_settings(mimo):
    lm = MiMoAudio(tokenizer_path="/models/tok", protocol="card")
    lm.auto_batch(64)  # --batch-size auto: a batch-1 runtime stays at 1
    longest = Prompt((QUESTION, _clip(2.0)), clip_id="a")  # batches run longest first: this one before the bad
    good, bad = lm.generate_items([longest, _prompt("fewshot", n_audios=2)])
    assert isinstance(bad, ModelError) and bad.clip_id == "fewshot" and "at most 1 clip" in bad.message
    assert good.startswith("hmm") and len(lm.runtime.forwards) == 1  # the good prompt ran once, not again
    info = lm.provenance()
    assert info["audio_placement"] == "audio-first" and info["tokenizer_path"] == "/models/tok"
    assert info["generation"]["global_sampler"] == {"do_sample": True, "temperature": 0.3, "top_p": 0.95}
    assert info["seeding"].startswith("per call") and info["runs_remote_code"] is False
    assert (info["dtype"], info["device"]) == ("bfloat16", "cpu")  # read off the weights themselves


# ---- Step-Audio 2 mini --------------------------------------------------------------------------------
class FakeStepAudio2:
    """stepaudio2.StepAudio2: constructor (model_path) and __call__(messages, **generation kwargs)."""

    def __init__(self, model_path: str) -> None:
        self.model_path = model_path
        self.llm = _weights("cuda:1")
        self.calls: list[dict] = []

    def __call__(self, messages, **kwargs):
        heard = copy.deepcopy(messages)
        for item in next(m for m in heard if m["role"] == "human")["content"]:
            if item["type"] == "audio":
                item["audio"] = _heard(item["audio"])
        self.calls.append({"messages": heard, "kwargs": kwargs})
        return [1, 2, 3], "decrease", []


@pytest.fixture
def step(monkeypatch):
    return _install(monkeypatch, "stepaudio2", StepAudio2=FakeStepAudio2)


def test_step_audio_messages_and_generation(step):
    with pytest.raises(ModelError, match="trust_remote_code=True"):
        StepAudio2Mini()
    lm = StepAudio2Mini(trust_remote_code=True, model_path="/ckpt/step-ft", protocol="card")
    assert lm.generate([_prompt("a")], max_new_tokens=128) == ["decrease"]
    lm.generate([_prompt("a", audio_first=True)], max_new_tokens=256)
    first, second = lm.runtime.calls
    assert lm.runtime.model_path == "/ckpt/step-ft"
    # examples.py mmau_test: the expert system prompt, a human turn of items, an open assistant turn
    assert first["messages"] == [
        {"role": "system", "content": EXPERT},
        {"role": "human", "content": [{"type": "text", "text": QUESTION},
                                      {"type": "audio", "audio": (48000, 24000, 0.25)}]},
        {"role": "assistant", "content": None},
    ]
    assert first["kwargs"] == {"max_new_tokens": 128, "do_sample": False, "num_beams": 2}
    assert [i["type"] for i in second["messages"][1]["content"]] == ["audio", "text"]
    assert second["kwargs"]["max_new_tokens"] == 256
    assert (lm.provenance()["device"], lm.provenance()["system_prompt"]) == ("cuda:1", EXPERT)


# ---- provenance helpers -------------------------------------------------------------------------------
def test_hub_commit_reads_the_offline_cache(tmp_path):
    sha = "fedcba9876543210fedcba9876543210fedcba98"
    repo = tmp_path / "models--org--model"
    (repo / "snapshots" / sha).mkdir(parents=True)
    (repo / "snapshots" / sha / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(sha)
    assert hub_commit("org/model", cache_dir=tmp_path) == sha
    assert hub_commit("org/other", cache_dir=tmp_path) is None  # not cached: unknown, not guessed
    assert hub_commit(str(tmp_path)) is None  # a plain local folder has no commit


@pytest.mark.parametrize("packed", [False, True])
def test_runtime_checkout_commit_is_recorded(kimi, tmp_path, monkeypatch, packed):
    sha = "aaaabbbbccccddddeeeeffff0000111122223333"
    git = tmp_path / "Kimi-Audio" / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/master\n")
    if packed:
        (git / "packed-refs").write_text(f"# pack-refs with: peeled\n{sha} refs/heads/master\n")
    else:
        (git / "refs" / "heads" / "master").write_text(sha + "\n")
    monkeypatch.setattr(kimi, "__file__", str(tmp_path / "Kimi-Audio" / "kimia_infer" / "api" / "kimia.py"))
    assert KimiAudio(trust_remote_code=True).provenance()["runtime_commit"] == sha


# ---- the paper's settings (the default protocol), written out by hand from ynklab/vocalgrad --------------
# plic/kimi_common.py AudioModelRuntime._generate_kimia: model.generate(messages, output_type="text",
# max_new_tokens=..., text_temperature=0.0 (T defaults to 0 for non-Gemini backends), text_top_k=5 (top_k
# default), text_repetition_penalty=1.0, text_repetition_window_size=16, audio_temperature=0.0, audio_top_k=5,
# audio_repetition_penalty=1.0, audio_repetition_window_size=64); messages: the text, then the audio.
KIMI_PAPER = {"output_type": "text", "text_temperature": 0.0, "text_top_k": 5, "text_repetition_penalty": 1.0,
              "text_repetition_window_size": 16, "audio_temperature": 0.0, "audio_top_k": 5,
              "audio_repetition_penalty": 1.0, "audio_repetition_window_size": 64}


def test_kimi_paper_settings_by_default(kimi):
    lm = KimiAudio(trust_remote_code=True)
    lm.generate([_prompt("a")], max_new_tokens=128)
    (call,) = lm.runtime.calls
    assert call["kwargs"] == {**KIMI_PAPER, "max_new_tokens": 128}
    assert [m["message_type"] for m in call["chats"]] == ["text", "audio"]
    assert lm.provenance()["protocol"] == "paper"
    with pytest.raises(ModelError, match="protocol='cards' is unknown"):
        KimiAudio(trust_remote_code=True, protocol="cards")


def test_step_audio_paper_settings_by_default(step):
    """plic/stepaudio2_runtime.py generate_text: "<|BOT|>human\\n" + prompt + audio (no system turn) and
    GenerationConfig(max_new_tokens, pad_token_id, eos_token_id, do_sample=False): plain greedy decoding."""
    lm = StepAudio2Mini(trust_remote_code=True)
    lm.generate([_prompt("a")], max_new_tokens=128)
    lm.generate([_prompt("a")], max_new_tokens=256)  # the runner's retry budget
    first, retry = lm.runtime.calls
    assert first["messages"] == [
        {"role": "human", "content": [{"type": "text", "text": QUESTION},
                                      {"type": "audio", "audio": (48000, 24000, 0.25)}]},
        {"role": "assistant", "content": None},
    ]
    assert first["kwargs"] == {"max_new_tokens": 128, "do_sample": False}  # no num_beams: GenerationConfig's 1
    assert retry["kwargs"] == {"max_new_tokens": 256, "do_sample": False}
    info = lm.provenance()
    assert info["protocol"] == "paper" and info["system_prompt"] is None


@pytest.fixture
def restore_determinism():
    """The paper's MiMo seeding switches torch's deterministic algorithms on for the process: undo it after."""
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2], before[3]


def test_mimo_paper_seeding_before_every_call(mimo, restore_determinism):
    """plic/kimi_common.py _generate_mimoaudio calls _apply_mimo_seed(1234) before every call: random.seed,
    torch.manual_seed (and CUDA's), cudnn.deterministic, use_deterministic_algorithms(True, warn_only=True)."""
    lm = MiMoAudio()
    lm.set_seed(1234)  # the runner hands --seed (default 1234, the paper's MIMOAUDIO_SEED default)
    lm.generate([_prompt("a"), _prompt("b")], max_new_tokens=128)
    lm.generate([_prompt("a")], max_new_tokens=256)
    torch.manual_seed(1234)
    published = int(torch.randint(0, 2**31 - 1, (1,)).item())  # the first draw after manual_seed(1234)
    assert [f["draw"] for f in lm.runtime.forwards] == [published] * 3
    assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
    assert lm.provenance()["seeding"].startswith("before every call") and lm.provenance()["protocol"] == "paper"
