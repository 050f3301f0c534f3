"""Models that ship their own inference runtime (not transformers classes): Kimi-Audio, MiMo-Audio,
Step-Audio 2 mini. Each is a thin adapter: build the runtime's message format from a Prompt, call it
one prompt at a time (the runtimes are batch-1), return the text. Optional imports: constructing one
without its runtime installed raises MissingDependency with the install command.
"""

from __future__ import annotations

import importlib
import inspect
import os
import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .base import BaseAudioLM, ModelError
from .protocol import Prompt


class MissingDependency(ImportError):
    """An optional model runtime is not installed; the message says how to install it."""


def import_runtime(modules: tuple[str, ...], hint: str) -> Any:
    """The first importable module of `modules`, else MissingDependency carrying `hint`."""
    errors = []
    for name in modules:
        try:
            return importlib.import_module(name)
        except ImportError as e:
            errors.append(f"{name}: {e}")
    raise MissingDependency(f"{hint} (tried {'; '.join(errors)})")


class ExternalAudioLM(BaseAudioLM):
    """Shared plumbing: remote-code consent, per-call seeding, clips written to temporary WAV files."""

    kind = "external"
    supports_choices = False  # these runtimes expose no per-token log-probabilities
    runs_remote_code = False  # True when the runtime executes modelling code downloaded from the Hub

    def __init__(self, name: str | None = None, *, trust_remote_code: bool = False, seed: int = 1234) -> None:
        super().__init__(name, batch_size=1)
        if self.runs_remote_code and not trust_remote_code:
            raise ModelError(
                f"{self.name} executes model code from its Hub repository; pass trust_remote_code=True "
                "(CLI: --trust-remote-code) if you accept that"
            )
        self.seed = seed

    def reseed(self) -> None:
        """Re-apply the seed before every call so sampled answers do not depend on batch order."""
        import torch

        random.seed(self.seed)
        np.random.seed(self.seed % 2**32)
        torch.manual_seed(self.seed)

    @staticmethod
    @contextmanager
    def clip_files(prompt: Prompt, sampling_rate: int | None = None) -> Iterator[list[str]]:
        """One temporary WAV path per audio segment (resampled when `sampling_rate` is given)."""
        import soundfile as sf

        with tempfile.TemporaryDirectory(prefix="vocalgrad-") as tmp:
            paths = []
            for i, clip in enumerate(prompt.audios):
                x, sr = np.asarray(clip.array, dtype=np.float32), clip.sampling_rate
                if sampling_rate and sr != sampling_rate:
                    import librosa

                    x, sr = librosa.resample(x, orig_sr=sr, target_sr=sampling_rate), sampling_rate
                path = os.path.join(tmp, f"clip{i}.wav")
                sf.write(path, x, sr, subtype="PCM_16")
                paths.append(path)
            yield paths

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int) -> list[str]:
        answers = []
        for p in prompts:
            self.reseed()
            answers.append(self._answer(p, max_new_tokens))
        return answers

    def _answer(self, prompt: Prompt, max_new_tokens: int) -> str:
        raise NotImplementedError

    @staticmethod
    def _interleave(prompt: Prompt, paths: list[str]) -> list[tuple[str, str]]:
        """("text", s) / ("audio", path) in segment order."""
        it = iter(paths)
        return [("text", s) if isinstance(s, str) else ("audio", next(it)) for s in prompt.segments]


class KimiAudio(ExternalAudioLM):
    """moonshotai/Kimi-Audio-7B-Instruct through kimia_infer, text output, greedy text sampling."""

    name = "kimi-audio"
    runs_remote_code = True
    # The README's recommended sampling, with text decoding greedy (text_temperature 0).
    SAMPLING = {
        "audio_temperature": 0.8, "audio_top_k": 10, "text_temperature": 0.0, "text_top_k": 5,
        "audio_repetition_penalty": 1.0, "audio_repetition_window_size": 64,
        "text_repetition_penalty": 1.0, "text_repetition_window_size": 16,
    }

    def __init__(self, model_path: str = "moonshotai/Kimi-Audio-7B-Instruct", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        api = import_runtime(
            ("kimia_infer.api.kimia",),
            "Kimi-Audio needs kimia_infer: git clone https://github.com/MoonshotAI/Kimi-Audio && "
            "pip install -r Kimi-Audio/requirements.txt -e Kimi-Audio",
        )
        self.runtime = api.KimiAudio(model_path=model_path, load_detokenizer=False)
        self._takes_budget = "max_new_tokens" in inspect.signature(self.runtime.generate).parameters

    def _answer(self, prompt: Prompt, max_new_tokens: int) -> str:
        with self.clip_files(prompt) as paths:
            messages = [{"role": "user", "message_type": kind, "content": value}
                        for kind, value in self._interleave(prompt, paths)]
            extra = {"max_new_tokens": max_new_tokens} if self._takes_budget else {}
            _, text = self.runtime.generate(messages, **self.SAMPLING, output_type="text", **extra)
        return text


class MiMoAudio(ExternalAudioLM):
    """XiaomiMiMo/MiMo-Audio-7B-Instruct through its runtime (audio-understanding sampler: T 0.3, top-p 0.95)."""

    name = "mimo-audio"

    def __init__(
        self,
        model_path: str = "XiaomiMiMo/MiMo-Audio-7B-Instruct",
        tokenizer_path: str = "XiaomiMiMo/MiMo-Audio-Tokenizer",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        mod = import_runtime(
            ("mimo_audio.mimo_audio", "src.mimo_audio.mimo_audio"),
            "MiMo-Audio needs its runtime: git clone https://github.com/XiaomiMiMo/MiMo-Audio && "
            "pip install -r MiMo-Audio/requirements.txt, then put MiMo-Audio on PYTHONPATH",
        )
        self.runtime = mod.MimoAudio(model_path, tokenizer_path)
        # The runtime's own audio-understanding sampler is the published setting; pin it explicitly.
        sampler = self.runtime.task_sampler_configs["audio_understanding"]["global"]
        sampler.temperature, sampler.top_p = 0.3, 0.95

    def _answer(self, prompt: Prompt, max_new_tokens: int) -> str:
        if len(prompt.audios) != 1:
            raise ModelError("MiMo-Audio's understanding prompt takes exactly one clip", prompt.clip_id)
        # The runtime's template is audio first, then the instruction text.
        text = "".join(s for s in prompt.segments if isinstance(s, str))
        with self.clip_files(prompt) as (path,):
            out = self.runtime.audio_understanding_sft(path, text, thinking=False)
        return out.replace("<think>", "").replace("</think>", "").strip()


class StepAudio2Mini(ExternalAudioLM):
    """stepfun-ai/Step-Audio-2-mini through its StepAudio2 runtime and its own chat format."""

    name = "step-audio-2-mini"
    runs_remote_code = True
    # The system prompt of the runtime's audio-understanding example.
    SYSTEM = "You are an expert in audio analysis, please analyze the audio content and answer the questions accurately."

    def __init__(self, model_path: str = "stepfun-ai/Step-Audio-2-mini", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        mod = import_runtime(
            ("stepaudio2",),
            "Step-Audio 2 mini needs its runtime: git clone https://github.com/stepfun-ai/Step-Audio2 && "
            "pip install -r Step-Audio2/requirements.txt, then put Step-Audio2 on PYTHONPATH",
        )
        self.runtime = mod.StepAudio2(model_path)

    def _answer(self, prompt: Prompt, max_new_tokens: int) -> str:
        with self.clip_files(prompt) as paths:
            content = [{"type": kind, kind: value} for kind, value in self._interleave(prompt, paths)]
            messages = [
                {"role": "system", "content": self.SYSTEM},
                {"role": "human", "content": content},
                {"role": "assistant", "content": None},
            ]
            _, text, _ = self.runtime(messages, max_new_tokens=max_new_tokens, do_sample=False)
        return text

