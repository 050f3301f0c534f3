"""The one protocol every model wrapper implements: generate, score choices, hidden states."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

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


@runtime_checkable
class AudioLM(Protocol):
    """What the runner, probes and fine-tuning need from a model."""

    name: str
    supports_choices: bool  # False for API models: score_choices raises a clear error

    def generate(self, prompts: list[Prompt], *, max_new_tokens: int = 128) -> list[str]:
        """One decoded answer per prompt."""
        ...

    def score_choices(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        """(B, len(choices)) summed log-probabilities of each choice as the assistant's answer."""
        ...

    def hidden_states(self, prompts: list[Prompt]) -> HiddenStates:
        """Hidden states of one forward pass over the prompts (no generation)."""
        ...
