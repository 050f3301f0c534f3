"""Models that ship their own inference runtime (not transformers classes): Kimi-Audio, MiMo-Audio,
Step-Audio 2 mini. Each is a thin adapter: build the runtime's message format from a Prompt, call it
one prompt at a time (the runtimes are batch-1), return the text. Optional imports: constructing one
without its runtime installed raises MissingDependency with the install command.

What each runtime needs (message format, audio placement, system prompt, generation settings) is data in
its RuntimeSpec below, with the official example it was read from. Clips go to the runtime as 16-bit
WAV files at their own sampling rate: every runtime loads and resamples the file itself
(`sampling_rate` says to what), exactly as in its authors' examples.

Sampling runtimes are seeded per call from sha256("{seed}:{clip_id}:{max_new_tokens}"): an answer does
not depend on batch order, on what was asked before (a preflight, a resumed run, a suite reusing the
model) or on the process, and the runner's retry (a larger budget) draws a different sample.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np

from .base import BaseAudioLM, ModelError
from .protocol import Listing, MissingDependency, Prompt
from .runtime_lora import RuntimeTraining, weight_placement

PROTOCOLS = ("paper", "card")  # --model-arg protocol=: the paper's settings (default) or the model card's


def check_protocol_name(protocol: str, name: str) -> str:
    """`protocol` when it names one of PROTOCOLS; ModelError otherwise."""
    if protocol not in PROTOCOLS:
        raise ModelError(f"{name}: protocol={protocol!r} is unknown; use paper (the paper's settings) or card "
                         "(the model card's)")
    return protocol


@dataclass(frozen=True)
class Decoding:
    """One protocol's prompt and decoding settings of a runtime, with where they were read."""

    system_prompt: str | None  # None: no system turn
    generation: dict[str, Any]  # fixed keyword arguments of every call
    # "per-answer": reseeded from sha256(seed:clip_id:budget) before each call (order-free, a new retry sample);
    # "fixed": the run's seed re-applied before every call, as the paper did (plic/kimi_common.py _apply_mimo_seed)
    seeding: Literal["per-answer", "fixed"]
    source: str


@dataclass(frozen=True)
class RuntimeSpec(Listing):
    """How one external runtime is installed, prompted and run."""

    name: str
    model_id: str  # default checkpoint (Hub id)
    runtime_modules: tuple[str, ...]  # first importable one is the runtime's entry module
    install_hint: str
    runs_remote_code: bool  # loads modelling code from the Hub repository (trust_remote_code=True inside)
    sampling_rate: int  # the runtime resamples every clip file to this rate itself
    dtype: str  # what the runtime loads the weights as (it offers no choice)
    # "segment-order": text and audio reach the runtime in the prompt's order; "audio-first": the runtime's
    # template puts the clip before the instruction whatever the prompt's order.
    audio_placement: Literal["segment-order", "audio-first"]
    max_audios: int | None  # clips per prompt the runtime's template takes (None: any)
    paper: Decoding  # how the paper ran it (ynklab/vocalgrad plic/), the default
    card: Decoding  # the model card's / official example's settings (--model-arg protocol=card)
    samples: bool = False  # draws random tokens (seeded per call, see the module docstring)


KIMI_AUDIO = RuntimeSpec(
    name="kimi-audio",
    registry_name="kimi-audio",
    description=("moonshotai/Kimi-Audio-7B-Instruct via kimia_infer (remote code), one message per segment in "
                 "prompt order; the paper's greedy text and audio (protocol=card: the README's sampling)"),
    model_id="moonshotai/Kimi-Audio-7B-Instruct",
    runtime_modules=("kimia_infer.api.kimia",),
    install_hint="Kimi-Audio needs kimia_infer: git clone --recursive https://github.com/MoonshotAI/Kimi-Audio && "
    "pip install -r Kimi-Audio/requirements.txt -e Kimi-Audio",
    runs_remote_code=True,  # KimiAudio loads AutoModelForCausalLM(..., trust_remote_code=True)
    sampling_rate=16000,  # prompt_manager: librosa.load(path, sr=16000) for the Whisper features
    dtype="bfloat16",
    audio_placement="segment-order",  # one {"role": "user", "message_type": ...} message per segment
    max_audios=None,
    # ynklab/vocalgrad plic/kimi_common.py AudioModelRuntime._generate_kimia: text then audio message, no system
    # turn, text_temperature 0 (greedy), top-k 5, audio_temperature 0.0 and audio_top_k 5.
    paper=Decoding(None, {
        "audio_temperature": 0.0, "audio_top_k": 5, "text_temperature": 0.0, "text_top_k": 5,
        "audio_repetition_penalty": 1.0, "audio_repetition_window_size": 64,
        "text_repetition_penalty": 1.0, "text_repetition_window_size": 16, "output_type": "text",
    }, "per-answer", "ynklab/vocalgrad plic/kimi_common.py AudioModelRuntime._generate_kimia"),
    # The README's sampling_params; text_temperature 0 makes the text stream greedy (the audio stream is
    # sampled but replaced by blanks for output_type="text", so answers are deterministic). The prompt
    # manager knows only user and assistant turns: no system prompt.
    card=Decoding(None, {
        "audio_temperature": 0.8, "audio_top_k": 10, "text_temperature": 0.0, "text_top_k": 5,
        "audio_repetition_penalty": 1.0, "audio_repetition_window_size": 64,
        "text_repetition_penalty": 1.0, "text_repetition_window_size": 16,
        "output_type": "text",
    }, "per-answer", "github.com/MoonshotAI/Kimi-Audio README sampling_params"),
    source="github.com/MoonshotAI/Kimi-Audio README 'Inference with Python' (ASR example: text message, then "
    "audio message; model.generate(messages, **sampling_params, output_type='text')); "
    "kimia_infer/api/kimia.py KimiAudio.generate(max_new_tokens=-1 means up to 7500 - prompt length)",
)

MIMO_AUDIO = RuntimeSpec(
    name="mimo-audio",
    registry_name="mimo-audio",
    description=("XiaomiMiMo/MiMo-Audio-7B-Instruct via its runtime's audio-understanding template (the clip "
                 "before the text, one clip); sampled at T 0.3, top-p 0.95, seeded before every call as in the "
                 "paper (protocol=card: per answer)"),
    model_id="XiaomiMiMo/MiMo-Audio-7B-Instruct",
    runtime_modules=("src.mimo_audio.mimo_audio", "mimo_audio.mimo_audio"),
    install_hint="MiMo-Audio needs its runtime: git clone https://github.com/XiaomiMiMo/MiMo-Audio && "
    "pip install -r MiMo-Audio/requirements.txt, then put MiMo-Audio (the folder holding src/) on PYTHONPATH",
    runs_remote_code=False,  # its model class is the cloned repository's own code
    sampling_rate=24000,  # MimoAudio.preprocess_input resamples to the MiMo-Audio-Tokenizer's rate
    dtype="bfloat16",
    # get_audio_understanding_sft_prompt: "<|im_start|>user\n" AUDIO TEXT "<|im_end|>\n<|im_start|>assistant\n"
    # "<think>\n\n</think>\n" (thinking=False)
    audio_placement="audio-first",
    max_audios=1,
    # The runtime's own audio_understanding sampler (global T 0.3, top-p 0.95), pinned so that a changed
    # runtime default cannot change results; audio_understanding_sft's stopping tokens (eos, <|im_end|>).
    # The paper passed no sampler settings (the same upstream defaults) and re-applied its seed (1234) before
    # every call (plic/kimi_common.py _generate_mimoaudio -> _apply_mimo_seed); the card's alternative
    # reseeds per answer, so a retry draws a new sample and batch order never matters.
    paper=Decoding(None, {
        "task_name": "audio_understanding", "thinking": False,
        "global_sampler": {"do_sample": True, "temperature": 0.3, "top_p": 0.95},
    }, "fixed", "ynklab/vocalgrad plic/kimi_common.py AudioModelRuntime._generate_mimoaudio"),
    card=Decoding(None, {
        "task_name": "audio_understanding", "thinking": False,
        "global_sampler": {"do_sample": True, "temperature": 0.3, "top_p": 0.95},
    }, "per-answer", "github.com/XiaomiMiMo/MiMo-Audio inference_example_sft.py"),
    samples=True,
    source="github.com/XiaomiMiMo/MiMo-Audio inference_example_sft.py ('audio understanding': "
    "model.audio_understanding_sft(audio_path, text)); src/mimo_audio/mimo_audio.py audio_understanding_sft "
    "(its body is called here with forward(max_new_tokens=...), which audio_understanding_sft does not pass: "
    "its default is 8192)",
)

STEP_AUDIO_2_MINI = RuntimeSpec(
    name="step-audio-2-mini",
    registry_name="step-audio-2-mini",
    description=("stepfun-ai/Step-Audio-2-mini via its runtime (remote code); the paper's plain greedy decoding, "
                 "no system turn (protocol=card: examples.py's expert system prompt, beam search of width 2)"),
    model_id="stepfun-ai/Step-Audio-2-mini",
    runtime_modules=("stepaudio2",),
    install_hint="Step-Audio 2 mini needs its runtime: git clone https://github.com/stepfun-ai/Step-Audio2 && "
    "pip install -r Step-Audio2/requirements.txt, then put Step-Audio2 on PYTHONPATH",
    runs_remote_code=True,  # StepAudio2 loads AutoModelForCausalLM(..., trust_remote_code=True)
    sampling_rate=16000,  # utils.load_audio(path, target_rate=16000)
    dtype="bfloat16",
    audio_placement="segment-order",  # human content items {"type": "text"|"audio"} in prompt order
    max_audios=None,
    # ynklab/vocalgrad plic/stepaudio2_runtime.py generate_text: "<|BOT|>human\n" + prompt + audio, no system
    # turn, GenerationConfig(max_new_tokens, pad, eos, do_sample=False): plain greedy decoding.
    paper=Decoding(None, {"do_sample": False}, "per-answer",
                   "ynklab/vocalgrad plic/stepaudio2_runtime.py generate_text"),
    # examples.py mmau_test: the expert system prompt and model(messages, max_new_tokens=256, num_beams=2), i.e.
    # beam search of width 2 (GenerationConfig's do_sample defaults to False); max_new_tokens from the runner.
    card=Decoding("You are an expert in audio analysis, please analyze the audio content and answer the "
                  "questions accurately.", {"do_sample": False, "num_beams": 2}, "per-answer",
                  "github.com/stepfun-ai/Step-Audio2 examples.py mmau_test"),
    source="github.com/stepfun-ai/Step-Audio2 examples.py mmau_test (audio understanding: the system prompt "
    "above, a human turn of audio and text items, an open assistant turn)",
)

RUNTIME_SPECS: dict[str, RuntimeSpec] = {s.name: s for s in (KIMI_AUDIO, MIMO_AUDIO, STEP_AUDIO_2_MINI)}


def import_runtime(modules: tuple[str, ...], hint: str) -> ModuleType:
    """The first importable module of `modules`, else MissingDependency carrying `hint`."""
    errors = []
    for name in modules:
        try:
            return importlib.import_module(name)
        except ImportError as e:
            errors.append(f"{name}: {e}")
    raise MissingDependency(f"{hint} (tried {'; '.join(errors)})")


def answer_seed(seed: int, clip_id: str, max_new_tokens: int) -> int:
    """The seed of one sampled answer: sha256("{seed}:{clip_id}:{max_new_tokens}") as a 31-bit integer.

    The token budget tells the runner's attempts apart (first try at --max-new-tokens, the retry at
    --retry-max-new-tokens), so the retry draws a new sample while every answer stays reproducible.
    """
    digest = hashlib.sha256(f"{seed}:{clip_id}:{max_new_tokens}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 2**31


def hub_commit(model_path: str, revision: str | None = None, cache_dir: str | Path | None = None) -> str | None:
    """The commit sha of a checkpoint when it can be known offline: a Hub snapshot directory's name, or
    the Hub cache's entry for (repo id, revision); None for other local folders or uncached ids."""
    path = Path(model_path).expanduser()
    if path.is_dir():
        resolved = path.resolve()
        return resolved.name if resolved.parent.name == "snapshots" else None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model_path, "config.json", cache_dir=cache_dir, revision=revision)
    except Exception:  # noqa: BLE001 - provenance is best effort: an odd id or cache gives "unknown"
        return None
    if isinstance(found, str) and Path(found).parent.parent.name == "snapshots":
        return Path(found).parent.name
    return None


def checkout_commit(module: ModuleType) -> str | None:
    """The git commit of the checkout a runtime module was imported from (None outside a git checkout)."""
    here = Path(getattr(module, "__file__", "") or "").resolve()
    for folder in here.parents:
        git = folder / ".git"
        if not git.is_dir():
            continue
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head.removeprefix("ref: ")
        if (git / ref).is_file():
            return (git / ref).read_text().strip()
        packed = git / "packed-refs"
        for line in packed.read_text().splitlines() if packed.is_file() else []:
            if line.endswith(" " + ref):
                return line.split(" ", 1)[0]
        return None
    return None


def resolve_checkpoint(model_path: str, revision: str | None) -> str:
    """What to hand the runtime: `model_path` itself, or for a pinned revision of a Hub id the local
    snapshot of that revision (the runtimes take no revision argument of their own)."""
    if revision is None:
        return model_path
    if Path(model_path).expanduser().exists():
        raise ModelError(f"revision={revision!r} names a Hub revision, but {model_path} is a local folder")
    from huggingface_hub import snapshot_download

    return snapshot_download(model_path, revision=revision)


class ExternalAudioLM(BaseAudioLM):
    """Shared plumbing: remote-code consent, the runtime import, per-call seeding, clips as WAV files."""

    kind = "external"
    spec: RuntimeSpec

    def __init__(
        self,
        name: str | None = None,
        *,
        model_path: str | None = None,
        revision: str | None = None,
        trust_remote_code: bool = False,
        seed: int = 1234,
        protocol: str = "paper",
    ) -> None:
        super().__init__(name, batch_size=1)
        self.protocol = check_protocol_name(protocol, self.name)
        self.decoding: Decoding = getattr(self.spec, protocol)
        if self.spec.runs_remote_code and not trust_remote_code:
            raise ModelError(
                f"{self.name} executes model code from its Hub repository; pass trust_remote_code=True "
                "(CLI: --model-arg trust_remote_code=true) if you accept that"
            )
        self.seed = seed
        self.model_path = model_path or self.spec.model_id
        self.revision = revision
        self.module = import_runtime(self.spec.runtime_modules, self.spec.install_hint)
        self.runtime = self._load(resolve_checkpoint(self.model_path, revision))
        self.commit = hub_commit(self.model_path, revision)

    @property
    def runs_remote_code(self) -> bool:
        return self.spec.runs_remote_code

    def auto_batch(self, start: int) -> None:
        """`--batch-size auto` sizes GPU batches; these runtimes answer one prompt per call, so the batch
        stays 1 (a failing prompt then costs its own row, never a re-run of the prompts batched with it)."""

    # ---- subclass hooks -----------------------------------------------------------------------------
    def _load(self, checkpoint: str) -> Any:
        """The runtime object for `checkpoint` (a Hub id or a local folder), checked for what we call."""
        raise NotImplementedError

    def _answer(self, prompt: Prompt, max_new_tokens: int) -> str:
        raise NotImplementedError

    def _weights(self) -> Any:
        """The runtime's torch module holding the LLM weights (for dtype and device), if it exposes one."""
        return None

    # ---- shared -------------------------------------------------------------------------------------
    def reseed(self, seed: int) -> None:
        """Seed Python, NumPy and torch (every device) before a call."""
        import torch

        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

    @staticmethod
    def reseed_as_published(seed: int) -> None:
        """The paper's seeding before every MiMo call (plic/kimi_common.py _apply_mimo_seed): Python and torch
        (every device) seeded, cuDNN deterministic, torch's deterministic algorithms (warn only)."""
        import torch

        random.seed(seed)
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True, warn_only=True)

    @staticmethod
    @contextmanager
    def clip_files(prompt: Prompt) -> Iterator[list[str]]:
        """One temporary 16-bit WAV path per audio segment, at the clip's own sampling rate."""
        import soundfile as sf

        with tempfile.TemporaryDirectory(prefix="vocalgrad-") as tmp:
            paths = []
            for i, clip in enumerate(prompt.audios):
                path = os.path.join(tmp, f"clip{i}.wav")
                sf.write(path, np.asarray(clip.array, dtype=np.float32), clip.sampling_rate, subtype="PCM_16")
                paths.append(path)
            yield paths

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int) -> list[str]:
        answers = []
        for p in prompts:
            limit = self.spec.max_audios
            if limit is not None and len(p.audios) > limit:
                raise ModelError(f"{self.name}'s template takes at most {limit} clip(s) per prompt, got "
                                 f"{len(p.audios)}", p.clip_id)
            if self.decoding.seeding == "fixed":
                self.reseed_as_published(self.seed)
            else:
                self.reseed(answer_seed(self.seed, p.clip_id, max_new_tokens))
            answers.append(self._answer(p, max_new_tokens).strip())  # the paper strips every answer
        return answers

    @staticmethod
    def _interleave(prompt: Prompt, paths: list[str]) -> list[tuple[str, str]]:
        """("text", s) / ("audio", path) in segment order."""
        it = iter(paths)
        return [("text", s) if isinstance(s, str) else ("audio", next(it)) for s in prompt.segments]

    def provenance(self) -> dict[str, Any]:
        """results.json model_info: checkpoint, revision and commit, weights dtype and device, the runtime
        and its checkout commit, and every fixed prompt and generation setting."""
        dtype, device = weight_placement(self._weights())
        return {
            "model_id": self.model_path,
            "revision": self.revision,
            "commit": self.commit,
            "dtype": str(dtype).removeprefix("torch.") if dtype is not None else self.spec.dtype,
            "device": str(device) if device is not None else None,
            "runtime": self.module.__name__,
            "runtime_commit": checkout_commit(self.module),
            "runs_remote_code": self.spec.runs_remote_code,
            "sampling_rate": self.spec.sampling_rate,
            "audio_placement": self.spec.audio_placement,
            "protocol": self.protocol,
            "system_prompt": self.decoding.system_prompt,
            "generation": self.decoding.generation,
            "seed": self.seed,
            "seeding": ("not sampled" if not self.spec.samples else "before every call: the seed itself, as the "
                        "paper did" if self.decoding.seeding == "fixed" else
                        "per call: sha256(seed:clip_id:max_new_tokens)"),
            "source": self.decoding.source,
            "adapter": getattr(self, "adapter", None),
        }


def require_parameter(fn: Any, parameter: str, what: str) -> None:
    """Refuse a runtime whose `fn` lacks `parameter` (an older or changed checkout) in one clear line."""
    if parameter not in inspect.signature(fn).parameters:
        raise ModelError(f"{what} takes no {parameter!r}: this checkout of the runtime differs from the one the "
                         "wrapper follows; update it")


class KimiAudio(RuntimeTraining, ExternalAudioLM):
    """moonshotai/Kimi-Audio-7B-Instruct through kimia_infer, text output, greedy text decoding."""

    name = "kimi-audio"
    spec = KIMI_AUDIO

    def _load(self, checkpoint: str) -> Any:
        runtime = self.module.KimiAudio(model_path=checkpoint, load_detokenizer=False)
        require_parameter(runtime.generate, "max_new_tokens", "kimia_infer's KimiAudio.generate")
        return runtime

    def _weights(self) -> Any:
        return getattr(self.runtime, "alm", None)

    def _answer(self, prompt: Prompt, max_new_tokens: int) -> str:
        with self.clip_files(prompt) as paths:
            messages = [{"role": "user", "message_type": kind, "content": value}
                        for kind, value in self._interleave(prompt, paths)]
            _, text = self.runtime.generate(messages, **self.decoding.generation, max_new_tokens=max_new_tokens)
        return text

    def encode(self, prompt: Prompt, answer: str | None = None) -> dict[str, Any]:
        """The prompt manager's streams for the user messages (+ the assistant's answer, the paper's fine-tuning
        messages), output_type "text"; an open assistant turn when there is no answer."""
        with self.clip_files(prompt) as paths:
            messages = [{"role": "user", "message_type": kind, "content": value}
                        for kind, value in self._interleave(prompt, paths)]
            if answer is not None:
                messages.append({"role": "assistant", "message_type": "text", "content": answer})
            history = self.runtime.prompt_manager.get_prompt(messages, output_type="text",
                                                             add_assistant_start_msg=answer is None)
        audio_ids, text_ids, continuous, _, text_loss_mask = history.to_tensor()
        return {"audio_input_ids": audio_ids, "text_input_ids": text_ids, "is_continuous_mask": continuous,
                "text_loss_mask": text_loss_mask, "continuous_features": list(history.continuous_feature)}

    def text_logits(self, model: Any, batch: dict[str, Any]) -> Any:
        """The text head's logits: MoonshotKimiaForCausalLM returns (mimo_output(...), lm_head(...))."""
        out = model(input_ids=batch["audio_input_ids"], text_input_ids=batch["text_input_ids"],
                    whisper_input_feature=batch["continuous_features"], is_continuous_mask=batch["is_continuous_mask"],
                    output_hidden_states=False, return_dict=True, use_cache=False)
        return out.logits[1]

    def choice_token_ids(self, choices: tuple[str, ...]) -> list[int]:
        """An ASCII space and the option, one token (evaluate_meld_mcq.py _candidate_ids)."""
        tokenizer = self.runtime.prompt_manager.text_tokenizer
        return self.single_tokens(choices, lambda c: tokenizer.encode(f" {c}", bos=False, eos=False))


class MiMoAudio(RuntimeTraining, ExternalAudioLM):
    """XiaomiMiMo/MiMo-Audio-7B-Instruct through its runtime's audio-understanding path (sampled)."""

    name = "mimo-audio"
    spec = MIMO_AUDIO

    def __init__(
        self, name: str | None = None, *, tokenizer_path: str = "XiaomiMiMo/MiMo-Audio-Tokenizer", **kwargs: Any
    ) -> None:
        self.tokenizer_path = tokenizer_path
        super().__init__(name, **kwargs)

    def _load(self, checkpoint: str) -> Any:
        runtime = self.module.MimoAudio(checkpoint, self.tokenizer_path)
        for method in ("get_audio_understanding_sft_prompt", "forward"):
            if not callable(getattr(runtime, method, None)):
                raise ModelError(f"MiMo-Audio's runtime has no {method}(); update the checkout")
        require_parameter(runtime.forward, "max_new_tokens", "MiMo-Audio's MimoAudio.forward")
        sampler = runtime.task_sampler_configs[self.decoding.generation["task_name"]]["global"]
        for key, value in self.decoding.generation["global_sampler"].items():
            if not hasattr(sampler, key):
                raise ModelError(f"MiMo-Audio's sampler has no {key!r}; update the checkout")
            setattr(sampler, key, value)
        return runtime

    def _weights(self) -> Any:
        return getattr(self.runtime, "model", None)

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "tokenizer_path": self.tokenizer_path}

    def _answer(self, prompt: Prompt, max_new_tokens: int) -> str:
        text = "".join(s for s in prompt.segments if isinstance(s, str))  # the template places it after the clip
        runtime, gen = self.runtime, self.decoding.generation
        with self.clip_files(prompt) as (path,):
            input_ids = runtime.get_audio_understanding_sft_prompt(path, text, thinking=gen["thinking"])
            stop = self.module.MiMoStopper(
                stop_tokens=[runtime.tokenizer.eos_token_id, runtime.im_end_idx],
                group_size=runtime.group_size,
                audio_channels=runtime.audio_channels,
            )
            out = runtime.forward(input_ids, stopping_criteria=[stop], task_name=gen["task_name"],
                                  max_new_tokens=max_new_tokens)
        # thinking=False already closes an empty <think></think> block in the prompt; drop stray tags.
        return out.replace("<think>", "").replace("</think>", "").strip()

    def encode(self, prompt: Prompt, answer: str | None = None) -> dict[str, Any]:
        """The SFT prompt's (1 + audio channels, T) ids, + InputSegment(text=f"{answer}<|im_end|>\\n") when there is
        an answer (plic/mimo_finetune.py build_mimo_audio_understanding_ids); prompt_token_count: the prompt's T."""
        import torch

        runtime = self.runtime
        text = "".join(s for s in prompt.segments if isinstance(s, str))
        if len(prompt.audios) != 1:
            raise ModelError(f"{self.name}'s template takes one clip per prompt, got {len(prompt.audios)}",
                             prompt.clip_id)
        with self.clip_files(prompt) as (path,):
            ids = runtime.get_audio_understanding_sft_prompt(path, text, thinking=False)
        count = int(ids.shape[1])
        if answer is not None:
            segment = self._speech_data().InputSegment(text=f"{answer}<|im_end|>\n",
                                                       speech_zeroemb_idx=runtime.speech_zeroemb_idx,
                                                       text_zeroemb_idx=runtime.empty_token)
            ids = torch.cat([ids, runtime.get_input_ids([segment])], dim=1)
        return {"input_ids": ids, "prompt_token_count": count}

    def _speech_data(self) -> ModuleType:
        """The runtime's process_speechdata module (InputSegment), beside its mimo_audio module."""
        return importlib.import_module(self.module.__name__.rsplit(".", 1)[0] + ".process_speechdata")

    def text_logits(self, model: Any, batch: dict[str, Any]) -> Any:
        """lm_head over the main decoder's last hidden state, one position per group (plic/mimo_finetune.py
        compute_mimo_text_loss): (1, groups, V)."""
        import torch

        runtime = self.runtime
        ids = batch["input_ids"]
        flat = ids.T.reshape(1, -1)
        groups = flat.shape[1] // ((runtime.audio_channels + 1) * runtime.group_size)
        mask = torch.ones((1, groups), dtype=torch.long, device=flat.device)
        kwargs = model.prepare_inputs_for_generation(flat, attention_mask=mask, use_cache=False)
        embeds = model._prepare_input_embeds(kwargs["input_ids"])
        out = model.model(inputs_embeds=embeds, attention_mask=kwargs["attention_mask"],
                          position_ids=kwargs["position_ids"], use_cache=False, return_dict=True,
                          cache_position=kwargs.get("cache_position"))
        return model.lm_head(out.last_hidden_state)

    def text_group_ids(self, model: Any, batch: dict[str, Any]) -> Any:
        """(1, groups) text-channel id at each group's first position (what the text head predicts)."""
        flat = batch["input_ids"].T.reshape(1, -1)
        grouped = model.prepare_inputs_for_generation(flat, attention_mask=None, use_cache=False)["input_ids"]
        return grouped[:, 0, :: self.runtime.group_size].long()

    def choice_token_ids(self, choices: tuple[str, ...]) -> list[int]:
        """The choice as the assistant's text starts (after the prompt's closed think block), one token."""
        tokenizer = self.runtime.tokenizer
        return self.single_tokens(choices, lambda c: tokenizer.encode(c))


class StepAudio2Mini(RuntimeTraining, ExternalAudioLM):
    """stepfun-ai/Step-Audio-2-mini through its StepAudio2 runtime and its own chat format."""

    name = "step-audio-2-mini"
    spec = STEP_AUDIO_2_MINI

    def _load(self, checkpoint: str) -> Any:
        return self.module.StepAudio2(checkpoint)

    def _weights(self) -> Any:
        return getattr(self.runtime, "llm", None)

    def _answer(self, prompt: Prompt, max_new_tokens: int) -> str:
        with self.clip_files(prompt) as paths:
            _, text, _ = self.runtime(self._messages(prompt, paths), max_new_tokens=max_new_tokens,
                                      **self.decoding.generation)
        return text

    def _messages(self, prompt: Prompt, paths: list[str]) -> list[dict[str, Any]]:
        """The protocol's system turn (if any), a human turn of text and audio items, an open assistant turn."""
        content = [{"type": kind, kind: value} for kind, value in self._interleave(prompt, paths)]
        system = self.decoding.system_prompt
        return [
            *([{"role": "system", "content": system}] if system is not None else []),
            {"role": "human", "content": content},
            {"role": "assistant", "content": None},
        ]

    def encode(self, prompt: Prompt, answer: str | None = None) -> dict[str, Any]:
        """The runtime's template chunks, tokenized and joined, with the clips' mels; with an answer, the open
        assistant turn becomes "<|BOT|>assistant\\n{answer}<|EOT|>" (plic/stepaudio2_finetune.py);
        prompt_token_count: the ids of the prompt alone."""
        import torch

        with self.clip_files(prompt) as paths:
            chunks, mels = self.runtime.apply_chat_template(self._messages(prompt, paths))
        ids = self._token_ids(chunks)
        count = int(ids.shape[1])
        if answer is not None:
            if chunks[-1] != "<|BOT|>assistant\n":
                raise ModelError(f"{self.name}: the runtime's template does not end with an open assistant turn")
            ids = self._token_ids([*chunks[:-1], f"<|BOT|>assistant\n{answer}<|EOT|>"])
        wavs = lens = None
        if mels:
            pad = getattr(self.module, "padding_mels", None)
            if pad is None:
                raise ModelError(f"{self.name}: the runtime module has no padding_mels; update the checkout")
            wavs, lens = pad(mels)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "wavs": wavs, "wav_lens": lens,
                "prompt_token_count": count}

    def _token_ids(self, chunks: list[Any]) -> Any:
        """(1, T): text chunks through the tokenizer, token-id chunks as they are (StepAudio2.__call__)."""
        import torch

        tok = self.runtime.llm_tokenizer
        parts = [tok(text=c, return_tensors="pt", padding=True)["input_ids"] if isinstance(c, str)
                 else torch.tensor([c], dtype=torch.long) for c in chunks]
        return torch.cat(parts, dim=-1).long()

    def text_logits(self, model: Any, batch: dict[str, Any]) -> Any:
        """The causal LM's logits over the joined ids, the clips' mels fed to its encoder."""
        return model(input_ids=batch["input_ids"], wavs=batch["wavs"], wav_lens=batch["wav_lens"],
                     attention_mask=batch["attention_mask"]).logits

    @property
    def pad_token_id(self) -> int:
        return int(self.runtime.llm_tokenizer.pad_token_id)

    def choice_token_ids(self, choices: tuple[str, ...]) -> list[int]:
        """The choice as the assistant's text starts right after "<|BOT|>assistant\\n", one token."""
        tok = self.runtime.llm_tokenizer
        return self.single_tokens(choices, lambda c: tok(text=c, return_tensors="pt")["input_ids"][0].tolist())
