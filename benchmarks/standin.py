"""Stand-in for speed measurements: a model of fixed cost."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

from harness.audio import mono_at
from harness.models.base import BaseAudioLM
from harness.models.protocol import Prompt


class StandInModel(BaseAudioLM):
    """A model of fixed cost for overlap measurements: it waits `seconds_per_clip` per clip (a wait, not CPU
    work, so the figure holds on a busy machine) and answers from a digest of the clip's real Whisper
    log-mels (16 kHz, 30 s window, 128 bins: Qwen2-Audio's front end), so a wrong or missing front end
    changes the answers. prepare_prompts does that front end ahead of time, as HFAudioLM does."""

    name = "standin"

    def __init__(self, seconds_per_clip: float, batch_size: int = 8) -> None:
        from transformers import WhisperFeatureExtractor

        super().__init__("standin", batch_size=batch_size)
        self.seconds_per_clip = seconds_per_clip
        self.extractor = WhisperFeatureExtractor(feature_size=128)

    def features_digest(self, prompt: Prompt) -> str:
        """sha256 over the log-mels of every clip of the prompt (the CPU front end)."""
        return StandInFrontEnd(self.extractor).digest(prompt)

    def clip_front_end(self) -> StandInFrontEnd:
        """The per-clip front end DataLoader workers run (picklable)."""
        return StandInFrontEnd(self.extractor)

    def prepare_prompts(self, prompts: list[Prompt]) -> list[Prompt]:
        """The front end, run by the runner's front-end threads where workers did not run it already."""
        return list(map(self.clip_front_end(), prompts))

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int) -> list[str]:
        digests = [p.meta.get("features_sha256") or self.features_digest(p) for p in prompts]  # serial path: here
        time.sleep(self.seconds_per_clip * len(prompts))  # the accelerator's share: a wait, CPU left free
        words = ("increase", "decrease", "Decrease.", "it rises")
        return [words[int(d[:8], 16) % len(words)] for d in digests]

    def _score_batch(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        digests = [p.meta.get("features_sha256") or self.features_digest(p) for p in prompts]
        time.sleep(self.seconds_per_clip * len(prompts))
        return np.array([[int(d[2 * i : 2 * i + 2], 16) / 255.0 for i in range(len(choices))] for d in digests])


class StandInFrontEnd:
    """The stand-in's front end: the log-mels' digest carried in the prompt's meta."""

    def __init__(self, extractor: Any) -> None:
        self.extractor = extractor

    def digest(self, prompt: Prompt) -> str:
        """sha256 over the log-mels of every clip of the prompt."""
        h = hashlib.sha256()
        for clip in prompt.audios:
            x = mono_at(clip, 16000)
            h.update(self.extractor(x, sampling_rate=16000, return_tensors="np")["input_features"].tobytes())
        return h.hexdigest()

    def __call__(self, prompt: Prompt) -> Prompt:
        if "features_sha256" in prompt.meta:
            return prompt
        return Prompt(prompt.segments, prompt.clip_id, {**prompt.meta, "features_sha256": self.digest(prompt)})
