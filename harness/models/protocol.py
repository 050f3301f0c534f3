"""The contract between models and everything that drives them (runner, probes, fine-tuning).

`AudioLM` is what every wrapper offers: capability flags, batched per-item methods that never raise for one
bad clip, and the all-or-nothing convenience calls built on them. `TrainableAudioLM` adds what LoRA
fine-tuning needs from a transformers model. `harness.models.base.BaseAudioLM` implements the batching,
OOM back-off and error isolation once; wrappers only fill its per-batch hooks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class AudioClip:
    """A mono float32 waveform and its sampling rate (wrappers resample to what they need)."""

    array: np.ndarray
    sampling_rate: int


Segment = str | AudioClip


@dataclass(frozen=True)
class Prompt:
    """A user turn as ordered text and audio segments (text-first, audio-first, few-shot interleaving)."""

    segments: tuple[Segment, ...]
    clip_id: str = ""
    # Row facts for weight-free baselines (category, onset_sec, offset_sec); real models ignore them.
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def audios(self) -> list[AudioClip]:
        return [s for s in self.segments if isinstance(s, AudioClip)]

    @property
    def text(self) -> str:
        """The text of the turn with audio positions shown as <audio>, as stored in samples files."""
        return "".join(s if isinstance(s, str) else "<audio>" for s in self.segments)


@dataclass
class HiddenStates:
    """Per-prompt hidden states a probe can read (float32 numpy arrays, batch-first)."""

    pre_llm_audio: list[np.ndarray] = field(default_factory=list)  # (L_audio, d) after encoder/adapter
    decoder: list[np.ndarray] = field(default_factory=list)  # (n_layers + 1, T, d) every decoder layer
    audio_positions: list[np.ndarray] = field(default_factory=list)  # indices of audio tokens in T
    output_position: list[int] = field(default_factory=list)  # index of the position predicting the answer
    # Named text positions in T where the wrapper can find them: "attribute" (last token of the word in
    # prompt.meta["attribute"]), "query-2"/"query-1" (last two tokens of the turn's last text segment).
    text_positions: list[dict[str, int]] = field(default_factory=list)
    # (n_layers + 1, L_audio, d) audio-encoder states of every layer, for encoder-only feature sources.
    encoder: list[np.ndarray] = field(default_factory=list)
    # Compact states (hidden_items(..., compact=True), reduced on the accelerator before the copy), where
    # `decoder` and `pre_llm_audio` stay empty: every decoder layer at the positions a probe reads, by name
    # ("output", the audio quarters a1..a4, the named text positions), (n_layers + 1, d) each; and segment
    # means (harness.models.pooling), (16, d) each, of "pre_llm" and "late_llm" (last layer, audio positions).
    positions: list[dict[str, np.ndarray]] = field(default_factory=list)
    pooled: list[dict[str, np.ndarray]] = field(default_factory=list)


class ModelError(RuntimeError):
    """One item (or one whole call) failed; `clip_id` names the row it belongs to."""

    def __init__(self, message: str, clip_id: str = "") -> None:
        super().__init__(message)
        self.clip_id = clip_id
        self.message = message

    def __repr__(self) -> str:
        return f"ModelError({self.message!r}, clip_id={self.clip_id!r})"


class ItemErrors(ModelError):
    """Some items of a call failed; `results` holds every item's value or its ModelError, in input order."""

    def __init__(self, results: list[Any]) -> None:
        errors = [r for r in results if isinstance(r, ModelError)]
        super().__init__(f"{len(errors)} of {len(results)} items failed; first: {errors[0].message}")
        self.results = results
        self.errors = errors


@dataclass(frozen=True, kw_only=True)
class Listing:
    """How a model appears in `harness list-models` and the README table, declared beside its settings."""

    registry_name: str = ""  # the --model name
    description: str = ""  # one line: what runs, and how it was configured
    source: str = ""  # the official usage the settings follow


class MissingDependency(ImportError):
    """An optional model runtime or library is not installed; the message says how to install it."""


@runtime_checkable
class AudioLM(Protocol):
    """What the runner and the probes need from a model.

    The `*_items` methods are the contract the drivers use: one value or one `ModelError` per prompt, in
    input order, never an exception for a single failing clip. `generate` / `score_choices` /
    `hidden_states` return plain values and raise `ItemErrors` (carrying the per-item results) otherwise.
    """

    name: str
    kind: str  # baseline | tiny | hf | external | api | encoder
    batch_size: int  # prompts per forward; OOM back-off may lower it during a run
    supports_choices: bool  # score_items works (token log-probabilities); False for API models
    supports_hidden_states: bool  # hidden_items works (probing)
    supports_adapters: bool  # load_adapter works (LoRA adapters from finetune/)
    supports_training: bool  # a TrainableAudioLM whose prompt + answer render as text (LoRA fine-tuning)
    max_audios: int | None  # clips one prompt may hold (None: any); few-shot needs 5

    def generate_items(self, prompts: list[Prompt], *, max_new_tokens: int = 128) -> list[str | ModelError]:
        """One decoded answer or ModelError per prompt."""
        ...

    def score_items(self, prompts: list[Prompt], choices: tuple[str, ...]) -> list[np.ndarray | ModelError]:
        """One (len(choices),) row of summed log-probabilities (each choice as the assistant's answer) or
        ModelError per prompt."""
        ...

    def hidden_items(self, prompts: list[Prompt], *, compact: bool = False) -> list[HiddenStates | ModelError]:
        """One single-prompt HiddenStates (one forward pass, no generation) or ModelError per prompt; with
        `compact`, the reduced states where the wrapper sets `supports_compact_hidden = True`, else full ones."""
        ...

    def generate(self, prompts: list[Prompt], *, max_new_tokens: int = 128) -> list[str]:
        """One decoded answer per prompt; raises ItemErrors when any item failed."""
        ...

    def score_choices(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        """(B, len(choices)) summed log-probabilities; raises ItemErrors when any item failed."""
        ...

    def hidden_states(self, prompts: list[Prompt]) -> HiddenStates:
        """Hidden states of the prompts, merged; raises ItemErrors when any item failed."""
        ...

    def auto_batch(self, start: int) -> None:
        """`--batch-size auto`: begin at `start`; out-of-memory back-off halves it to the largest that fits."""
        ...

    def set_seed(self, seed: int) -> None:
        """The run's seed, for models whose answers are drawn (sampling runtimes, the random baseline)."""
        ...

    def load_adapter(self, path: str) -> None:
        """Attach a LoRA adapter (a finetune/ output directory or Hub id); raises ModelError when unsupported."""
        ...

    def provenance(self) -> dict[str, Any]:
        """What identifies the weights for results.json: model id, revision / commit, dtype, device, ..."""
        ...

    def prepare_prompts(self, prompts: list[Prompt]) -> list[Prompt]:
        """CPU work that can run ahead of the model (the runner's front-end thread); the prompts it returns get
        the same answers. Wrappers without such work return `prompts`."""
        ...

    def clip_front_end(self) -> Any:
        """A picklable per-prompt callable (Prompt -> Prompt) that row processes may run ahead of the model
        (resampling, per-clip features), or None where the wrapper has none."""
        ...


@runtime_checkable
class TrainableAudioLM(AudioLM, Protocol):
    """An AudioLM whose transformers model LoRA fine-tuning can adapt in place (finetune/)."""

    model: Any  # the torch.nn.Module (a transformers PreTrainedModel) that LoRA layers are injected into
    model_id: str
    dtype: Any  # torch.dtype the weights run in
    decoder_path: str  # dotted path of the text decoder inside `model` ("all_linear" adapts its linears)
    lm_head_path: str  # dotted path of the output head ("lm_head" scope)
    family: str  # the family spec's name, for training records
    # Where the audio encoder and its projector sit (harness.models.families.AudioStack), for the prompt-
    # conditioned layer mixer; None where the family has no such seam.
    audio_stack: Any

    def training_inputs(self, prompts: list[Prompt], answers: list[str], *,
                        end_of_turn: bool = True) -> dict[str, Any]:
        """Model inputs for prompt + assistant answer, `labels` -100 everywhere but the answer's tokens."""
        ...

    def base_revision(self) -> str | None:
        """The commit the base weights came from (Hub-resolved), else the family's pinned revision."""
        ...


def missing_members(obj: Any, protocol: type) -> list[str]:
    """Names of the protocol's attributes and methods that `obj` lacks (empty when it conforms)."""
    names = [n for n in dir(protocol) if not n.startswith("_") and n not in dir(Protocol)]
    names += list(getattr(protocol, "__annotations__", {}))
    for base in protocol.__mro__[1:]:
        names += list(getattr(base, "__annotations__", {}))
    return sorted({n for n in names if not hasattr(obj, n)})
