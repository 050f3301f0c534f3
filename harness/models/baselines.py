"""Weight-free baselines: always-increase, seeded random, and the signal oracle (reads the DSP ground truth)."""

from __future__ import annotations

import hashlib

import numpy as np

from ..parsing import DECREASE, INCREASE, SYNONYM
from .base import BaseAudioLM, ModelError, query_audio
from .protocol import Prompt


def _choice_signs(choices: tuple[str, ...]) -> np.ndarray:
    """+1 for increase-family choices, -1 for decrease-family ones, 0 for anything else ("yes", "constant")."""
    signs = []
    for c in choices:
        fams = SYNONYM.families(c)
        signs.append(1.0 if fams == {INCREASE} else -1.0 if fams == {DECREASE} else 0.0)
    return np.array(signs)


class LabelBaseline(BaseAudioLM):
    """A baseline that decides a label and a positive margin per prompt; generate says the label word."""

    kind = "baseline"

    def __init__(self, name: str | None = None, *, batch_size: int = 256) -> None:
        super().__init__(name, batch_size=batch_size)

    def decide(self, prompt: Prompt) -> tuple[str, float]:
        """("increase" | "decrease", margin >= 0) for one prompt."""
        raise NotImplementedError

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int) -> list[str]:
        return [self.decide(p)[0] for p in prompts]

    def _score_batch(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        signs = _choice_signs(choices)
        rows = []
        for p in prompts:
            label, margin = self.decide(p)
            rows.append(signs * (margin if label == INCREASE else -margin))
        return np.array(rows)


class AlwaysIncrease(LabelBaseline):
    """Answers "increase" to everything (the 50 % floor of a balanced split)."""

    name = "always-increase"

    def decide(self, prompt: Prompt) -> tuple[str, float]:
        return INCREASE, 1.0


class RandomBaseline(LabelBaseline):
    """A fair coin per clip, seeded from sha256(f"{seed}:{clip_id}") so reruns and shards agree."""

    name = "random"

    def __init__(self, name: str | None = None, *, seed: int = 1234, batch_size: int = 256) -> None:
        super().__init__(name, batch_size=batch_size)
        self.seed = seed

    def decide(self, prompt: Prompt) -> tuple[str, float]:
        digest = hashlib.sha256(f"{self.seed}:{prompt.clip_id}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
        return (INCREASE if rng.random() < 0.5 else DECREASE), 1.0


class SignalOracle(LabelBaseline):
    """Reads the manipulated parameter's trajectory from the signal (vocalgrad_dataset.oracle)."""

    name = "signal-oracle"

    def decide(self, prompt: Prompt) -> tuple[str, float]:
        from vocalgrad_dataset.oracle import predict  # lazy: the DSP stack loads only when used

        meta = prompt.meta
        missing = [k for k in ("category", "onset_sec", "offset_sec") if meta.get(k) is None]
        if missing:
            raise ModelError(f"signal-oracle needs prompt.meta {missing}", prompt.clip_id)
        clip = query_audio(prompt)
        sr = clip.sampling_rate
        audio = np.asarray(clip.array, dtype=np.float32)
        onset = min(len(audio), round(float(meta["onset_sec"]) * sr))
        offset = min(len(audio), round(float(meta["offset_sec"]) * sr))
        label, score = predict(str(meta["category"]), audio, sr, onset, offset)
        if label not in (INCREASE, DECREASE):
            raise ModelError(f"oracle returned label {label!r}", prompt.clip_id)
        return label, abs(float(score))
