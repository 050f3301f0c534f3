"""BaseAudioLM: the one place for batching, OOM back-off, device/dtype placement and per-item error rows.

Error contract (what the runner relies on):
- `generate_items` / `score_items` / `hidden_items` never raise for a failing item: each position holds
  the item's value or a `ModelError` naming the clip, in input order.
- `generate` / `score_choices` / `hidden_states` (the `AudioLM` protocol) return plain values when every
  item succeeded and otherwise raise `ItemErrors`, whose `.results` is the `*_items` list above, so a
  caller can still write the good rows and one error row per failed clip. Nothing is ever replaced by a
  silent empty answer (an empty string is only returned when the model itself generated nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, TypeVar

import numpy as np

from .protocol import AudioClip, HiddenStates, ItemErrors, ModelError, Prompt

log = logging.getLogger(__name__)

T = TypeVar("T")


def is_oom(exc: BaseException) -> bool:
    """True for CUDA/MPS/CPU allocator out-of-memory errors (checked by name so torch is not imported)."""
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def resolve_device(device: Any = None) -> Any:
    """The torch device to place a model on: the one passed, else accelerate's choice for this process."""
    import torch

    if device is not None:
        try:
            chosen = torch.device(device)
        except RuntimeError as err:  # "cuda:x" and other malformed strings
            raise ModelError(f"--device {device!r}: {' '.join(str(err).split())}") from None
        check_device_available(chosen)
        return chosen
    from accelerate import Accelerator

    return Accelerator().device


def check_device_available(device: Any) -> None:
    """Refuse, in one line, a device this torch cannot use (CUDA on a CPU-only build or without a GPU, an index
    past the GPUs there are, MPS off a Mac) instead of a traceback from the first tensor moved there."""
    import torch

    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            why = "this torch was built without CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise ModelError(f"--device {device}: {why}; use --device cpu or leave --device out")
        if device.index is not None and device.index >= count:
            raise ModelError(f"--device {device}: only {count} CUDA GPU(s) visible (cuda:0..cuda:{count - 1})")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ModelError(f"--device {device}: MPS is not available here; use --device cpu")


def check_attn_implementation(name: str | None, device: Any) -> None:
    """Refuse `flash_attention_2` where it cannot run (no flash-attn package, or not a CUDA device): transformers
    would raise deep inside from_pretrained; one line saying what to use instead."""
    import importlib.util

    if name != "flash_attention_2":
        return
    if importlib.util.find_spec("flash_attn") is None:
        raise ModelError("--attn-implementation flash_attention_2 needs the flash-attn package (pip install "
                         "flash-attn, on a CUDA machine); use sdpa (the default) or eager")
    if getattr(device, "type", str(device)) != "cuda":
        raise ModelError(f"--attn-implementation flash_attention_2 runs on CUDA GPUs only, not on {device}; "
                         "use sdpa (the default) or eager")


def resolve_dtype(dtype: Any, device: Any) -> Any:
    """A torch dtype from a name; "auto" means bfloat16 on an accelerator and float32 on CPU."""
    import torch

    if dtype is None or dtype == "auto":
        return torch.float32 if torch.device(device).type == "cpu" else torch.bfloat16
    if isinstance(dtype, str):
        found = getattr(torch, dtype.removeprefix("torch."), None)
        if not isinstance(found, torch.dtype):
            raise ValueError(f"unknown dtype {dtype!r} (use e.g. float32, bfloat16, float16 or auto)")
        return found
    return dtype


def audio_seconds(prompt: Prompt) -> float:
    """Total audio duration of a prompt, the key batches are sorted by."""
    return sum(len(a.array) / a.sampling_rate for a in prompt.audios)


def merge_hidden(parts: Sequence[HiddenStates]) -> HiddenStates:
    """Concatenate per-item HiddenStates (each holding one prompt) in order."""
    out = HiddenStates()
    for p in parts:
        for f in fields(HiddenStates):  # every per-prompt list, including ones a wrapper leaves empty
            getattr(out, f.name).extend(getattr(p, f.name))
    return out


def split_hidden(hs: HiddenStates) -> list[HiddenStates]:
    """One HiddenStates per prompt of a batch result."""
    names = [f.name for f in fields(HiddenStates)]
    n = max(len(getattr(hs, k)) for k in names)
    # A field a wrapper does not fill (e.g. `decoder` of an encoder-only source) stays empty per prompt.
    return [HiddenStates(**{k: getattr(hs, k)[i : i + 1] for k in names}) for i in range(n)]


def raise_if_errors(results: list[T | ModelError]) -> list[T]:
    """The values when every item succeeded, else ItemErrors carrying all results."""
    if any(isinstance(r, ModelError) for r in results):
        raise ItemErrors(results)
    return results  # type: ignore[return-value]


class BaseAudioLM:
    """Batched, OOM-tolerant driver around three small per-batch hooks that subclasses implement."""

    name: str = "base"
    kind: str = "base"
    supports_choices: bool = True
    supports_hidden_states: bool = False
    supports_compact_hidden: bool = False
    supports_adapters: bool = False
    supports_training: bool = False
    max_audios: int | None = None
    seed: int | None = None

    def __init__(self, name: str | None = None, *, batch_size: int = 8) -> None:
        if name is not None:
            self.name = name
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.batch_size = batch_size
        # Observable run facts for results.json: the batch size we ended with and how often OOM halved it.
        self.stats: dict[str, int] = {"batch_size": batch_size, "oom_halvings": 0, "item_errors": 0}

    def auto_batch(self, start: int) -> None:
        """`--batch-size auto`: begin at `start`; the OOM back-off in _map halves it to the largest that fits."""
        self.batch_size = self.stats["batch_size"] = start

    def set_seed(self, seed: int) -> None:
        """The run's seed; models that draw their answers read `self.seed` (greedy ones ignore it)."""
        self.seed = seed

    def load_adapter(self, path: str) -> None:
        """Only wrappers with supports_adapters (transformers models) take LoRA adapters."""
        raise ModelError(f"model {self.name!r} ({self.kind}) cannot take a LoRA adapter")

    def provenance(self) -> dict[str, Any]:
        """What identifies the weights (results.json "model_info"); wrappers with weights add id and revision."""
        return {"kind": self.kind}

    # ---- hooks -------------------------------------------------------------------------------------
    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int) -> list[str]:
        raise NotImplementedError

    def _score_batch(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        """Default for causal LMs: one prompt forward per batch; each choice scored as the assistant's answer.

        A choice's score is the summed log-prob of its tokens as the chat template renders them after the
        generation prompt. Single-token choices are read off the last prompt position; the remaining tokens
        of multi-token choices come from `_continuation_logprobs` (the prompt state reused, never re-encoded).
        """
        import torch

        token_ids = self._choice_token_ids(choices)
        if any(len(t) == 0 for t in token_ids):
            raise ModelError(f"a choice renders to no tokens: {choices}")
        multi = any(len(t) > 1 for t in token_ids)
        last_logits, state = self._prompt_logits(prompts, keep_state=multi)
        logp = torch.log_softmax(last_logits.float(), dim=-1)
        scores = torch.stack([logp[:, t[0]] for t in token_ids], dim=1)
        if multi:
            scores = scores + self._continuation_logprobs(state, token_ids).to(scores.device)
        return scores.double().cpu().numpy()

    def _choice_token_ids(self, choices: tuple[str, ...]) -> list[list[int]]:
        """Token ids of each choice as rendered in the assistant turn (causal LMs implement this)."""
        raise NotImplementedError(f"{type(self).__name__} does not score choices")

    def _prompt_logits(self, prompts: list[Prompt], keep_state: bool) -> tuple[Any, Any]:
        """(B, V) next-token logits after each prompt's generation prompt, and state to continue from."""
        raise NotImplementedError(f"{type(self).__name__} does not score choices")

    def _continuation_logprobs(self, state: Any, token_ids: list[list[int]]) -> Any:
        """(B, C) summed log-probs of tokens 2.. of each choice given the prompt state."""
        raise NotImplementedError(f"{type(self).__name__} does not score multi-token choices")

    def _hidden_batch(self, prompts: list[Prompt]) -> HiddenStates:
        raise ModelError(f"{self.name} does not expose hidden states")

    def _free_memory(self) -> None:
        """Release cached accelerator memory after an OOM (no-op without torch/CUDA)."""
        import sys

        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()

    # ---- per-item API (never raises for an item) ---------------------------------------------------
    def generate_items(self, prompts: list[Prompt], *, max_new_tokens: int = 128) -> list[str | ModelError]:
        """One answer or ModelError per prompt, in input order."""
        return self._map(prompts, lambda ps: list(self._generate_batch(ps, max_new_tokens)))

    def score_items(self, prompts: list[Prompt], choices: tuple[str, ...]) -> list[np.ndarray | ModelError]:
        """One (len(choices),) log-prob row or ModelError per prompt, in input order."""
        if not self.supports_choices:
            raise ModelError(f"{self.name} cannot score choices (no token log-probabilities); use --mode generate")
        choices = tuple(choices)
        return self._map(prompts, lambda ps: list(np.asarray(self._score_batch(ps, choices), dtype=np.float64)))

    def hidden_items(self, prompts: list[Prompt], *, compact: bool = False) -> list[HiddenStates | ModelError]:
        """One single-prompt HiddenStates or ModelError per prompt, in input order (compact: see AudioLM)."""
        if compact and self.supports_compact_hidden:
            return self._map(prompts, lambda ps: split_hidden(self._hidden_batch(ps, compact=True)))
        return self._map(prompts, lambda ps: split_hidden(self._hidden_batch(ps)))

    # ---- AudioLM protocol ---------------------------------------------------------------------------
    def generate(self, prompts: list[Prompt], *, max_new_tokens: int = 128) -> list[str]:
        """One decoded answer per prompt (greedy); raises ItemErrors if any item failed."""
        return raise_if_errors(self.generate_items(prompts, max_new_tokens=max_new_tokens))

    def score_choices(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        """(B, C) summed log-probs of each choice as the assistant's answer; raises ItemErrors on failures."""
        rows = raise_if_errors(self.score_items(prompts, choices))
        return np.stack(rows) if rows else np.zeros((0, len(choices)))

    def hidden_states(self, prompts: list[Prompt]) -> HiddenStates:
        """Hidden states of one forward pass per batch; raises ItemErrors on failures."""
        return merge_hidden(raise_if_errors(self.hidden_items(prompts)))

    # ---- the batching engine -------------------------------------------------------------------------
    @staticmethod
    def _batch_order(prompts: list[Prompt]) -> list[int]:
        """The order _map runs prompts in; its batches are consecutive runs of batch_size of it."""
        # Longest first: similar lengths pad less, and an OOM shows up on the first batch, not the last.
        return sorted(range(len(prompts)), key=lambda i: -audio_seconds(prompts[i]))

    def planned_batches(self, prompts: list[Prompt]) -> list[list[Prompt]]:
        """The batches a *_items call on `prompts` will run (unless an OOM halves them)."""
        order = self._batch_order(prompts)
        return [[prompts[i] for i in order[k : k + self.batch_size]] for k in range(0, len(order), self.batch_size)]

    def prepare_prompts(self, prompts: list[Prompt]) -> list[Prompt]:
        """CPU work that can run ahead of the model (the runner calls it from its front-end thread): prompts
        that get the same answers, possibly with work done or cached; the default does nothing."""
        return prompts

    def clip_front_end(self) -> Any:
        """A picklable per-prompt callable row processes may run ahead of the model; the default has none."""
        return None

    def _map(self, prompts: list[Prompt], fn: Callable[[list[Prompt]], list[T]]) -> list[T | ModelError]:
        """Run fn over length-sorted batches, halving the batch on OOM and isolating failing items."""
        n = len(prompts)
        order = self._batch_order(prompts)
        results: list[Any] = [None] * n
        pos = 0
        while pos < n:
            chunk = order[pos : pos + self.batch_size]
            try:
                values = self._checked(fn, [prompts[i] for i in chunk])
            except Exception as exc:  # noqa: BLE001 - every failure becomes a retry or an error row
                if is_oom(exc) and len(chunk) > 1:
                    self._free_memory()
                    self.batch_size = max(1, len(chunk) // 2)
                    self.stats["oom_halvings"] += 1
                    self.stats["batch_size"] = self.batch_size
                    log.warning("%s: out of memory at batch %d; retrying at %d", self.name, len(chunk), self.batch_size)
                    continue
                if is_oom(exc):
                    self._free_memory()
                # A batch that fails for another reason is re-run item by item so one bad clip costs one row.
                values = [self._one(fn, prompts[i], exc if len(chunk) == 1 else None) for i in chunk]
            for i, v in zip(chunk, values, strict=True):
                results[i] = v
            pos += len(chunk)
        self.stats["item_errors"] += sum(isinstance(r, ModelError) for r in results)
        return results

    @staticmethod
    def _checked(fn: Callable[[list[Prompt]], list[T]], batch: list[Prompt]) -> list[T]:
        values = fn(batch)
        if len(values) != len(batch):
            raise ModelError(f"model returned {len(values)} results for {len(batch)} prompts")
        return values

    def _one(self, fn: Callable[[list[Prompt]], list[T]], prompt: Prompt, exc: BaseException | None) -> T | ModelError:
        """Run one prompt alone (unless its failure is already known) and turn an exception into an error row."""
        if exc is None:
            try:
                return self._checked(fn, [prompt])[0]
            except Exception as e:  # noqa: BLE001
                exc = e
                if is_oom(e):
                    self._free_memory()
        log.warning("%s: item %s failed: %r", self.name, prompt.clip_id, exc)
        if isinstance(exc, ModelError):
            return ModelError(exc.message, prompt.clip_id)
        return ModelError(f"{type(exc).__name__}: {exc}", prompt.clip_id)


def wav_base64(array: np.ndarray, sampling_rate: int) -> str:
    """A mono clip as base64 16-bit PCM WAV (what chat APIs and mistral-common accept)."""
    import base64
    import io

    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.asarray(array, dtype=np.float32), sampling_rate, format="WAV", subtype="PCM_16")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def query_audio(prompt: Prompt) -> AudioClip:
    """The clip a single-answer baseline judges: the last audio of the turn (the query in few-shot)."""
    audios = prompt.audios
    if not audios:
        raise ModelError("prompt has no audio", prompt.clip_id)
    return audios[-1]
