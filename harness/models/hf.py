"""HFAudioLM: one generic transformers wrapper; a FamilySpec carries every per-family difference."""

from __future__ import annotations

import copy
import inspect
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.audio import mono_at

from .base import (
    BaseAudioLM,
    ModelError,
    check_attn_implementation,
    resolve_device,
    resolve_dtype,
    wav_base64,
)
from .checkpoint import active_lora_adapters, adapter_digest, local_folder, weights_digest
from .external import hub_commit
from .families import AudioStack, FamilySpec, get_family
from .fast_encoder import GENERATE_EXACT, build_fast_audio
from .frontends import importable, load_processor, without_towers
from .pooling import pool_on_device, quarter_positions
from .protocol import AudioClip, HiddenStates, Prompt
from .weights_check import check_adapter_family, check_weight_files

log = logging.getLogger(__name__)

# Rendered in place of a clip when only the chat template's text is needed (the processor inserts audio).
_AUDIO_STUB = "<clip>"
# Processor outputs prepare_prompts may hold at once (a few batches of the runner's front end)
_READY_BATCHES = 8


@dataclass
class PromptPass:
    """What one prompt forward leaves behind for scoring, continuation and probing."""

    last_logits: torch.Tensor  # (B, V) at the last prompt position
    attention_mask: torch.Tensor  # (B, T), left padded
    last_position: torch.Tensor  # (B,) RoPE position of the last prompt token
    cache: Any = None
    hidden: tuple[torch.Tensor, ...] | None = None  # (n_layers + 1) x (B, T, d)


def _resolve(module: Any, path: str) -> Any:
    for part in path.split("."):
        module = getattr(module, part)
    return module


def _audio_token_id(config: Any, processor: Any) -> int:
    """The placeholder id the model overwrites with audio features."""
    for holder in (config, getattr(config, "audio_config", None), getattr(config, "thinker_config", None)):
        value = getattr(holder, "audio_token_id", None) if holder is not None else None
        if isinstance(value, int):
            return value
    value = getattr(processor, "audio_token_id", None)
    if isinstance(value, int):
        return value
    return int(processor.tokenizer.convert_tokens_to_ids(processor.audio_token))


def _gemma3n_slots(lm: HFAudioLM, inputs: dict[str, torch.Tensor], clips: list[AudioClip]) -> list[tuple[int, int]]:
    """(slots, slots carrying the clip) per clip, from the mel frames the processor marks valid.

    Source: transformers models/gemma3n/modeling_gemma3n.py. Gemma3nAudioEncoder.forward keeps, for subsampled
    frame i, the mask of mel frame i * prod(sscp_conv_stride_size[k][0]) (valid mel frames are a prefix, so
    ceil(n / stride) frames are real), then every conf_reduction_factor-th frame; Gemma3nModel.forward writes
    the embedding of the last audio vocab id over masked frames and over the rest of the
    audio_soft_tokens_per_image slots the processor inserted."""
    config = lm.model.config
    stride = math.prod(s[0] for s in config.audio_config.sscp_conv_stride_size)
    reduction = config.audio_config.conf_reduction_factor
    total = config.audio_soft_tokens_per_image
    frames = inputs["input_features_mask"].sum(-1).tolist()
    return [(total, min(total, math.ceil(math.ceil(n / stride) / reduction))) for n in frames]


def _mistral_slots(lm: HFAudioLM, inputs: dict[str, torch.Tensor], clips: list[AudioClip]) -> list[tuple[int, int]]:
    """(slots, slots carrying the clip) per clip, from the clip's length in samples.

    Source: mistral_common/tokens/tokenizers/audio.py (mistral-common 1.11+). AudioEncoder pads a clip with
    zeros to a multiple of AudioConfig.chunk_length_s (30 s) and writes num_audio_tokens(padded samples)
    [AUDIO] tokens (12.5 per second: one per 8 hops of 160 samples); the clip's own samples are the first
    num_audio_tokens(its samples) of them, the others encode the zero padding."""
    config = lm.processor.tokenizer.tokenizer.instruct_tokenizer.audio_encoder.audio_config
    out = []
    for clip in clips:
        n = len(mono_at(clip, lm.spec.sampling_rate))
        padded = math.ceil(n / config.chunk_frames) * config.chunk_frames
        out.append((config.num_audio_tokens(padded), config.num_audio_tokens(n)))
    return out


# FamilySpec.audio_slots -> (model, processor outputs, the batch's clips in order) -> (slots, carrying) per clip
SLOT_RULES: dict[str, Callable[[HFAudioLM, dict[str, torch.Tensor], list[AudioClip]], list[tuple[int, int]]]] = {
    "gemma3n": _gemma3n_slots, "mistral-common": _mistral_slots,
}


def carrying_positions(positions: np.ndarray, slots: list[tuple[int, int]], clip_id: str = "") -> np.ndarray:
    """The audio positions that carry a clip: of each clip's block of `slots` positions (in order), the first
    `carrying` ones."""
    if sum(total for total, _ in slots) != len(positions):
        raise ModelError(f"{len(positions)} audio slots in the prompt, but its clips should take "
                         f"{sum(total for total, _ in slots)}", clip_id)
    keep, start = [], 0
    for total, real in slots:
        keep.append(positions[start : start + real])
        start += total
    return np.concatenate(keep) if keep else positions[:0]


def family_model_type(spec: FamilySpec) -> str:
    """The config.json `model_type` of the family's checkpoints (its transformers config class says it)."""
    import transformers

    return getattr(transformers, spec.model_class).config_class.model_type


def checkpoint_config(model_id: str, revision: str | None = None) -> dict[str, Any]:
    """The checkpoint's config.json as a dict (a folder, or a Hub id as cached or downloaded), read before any
    weight is loaded."""
    from transformers import PretrainedConfig

    try:
        config, _ = PretrainedConfig.get_config_dict(model_id, revision=revision)
    except (OSError, ValueError) as err:
        raise ModelError(f"cannot read config.json of {model_id}: {err}") from None
    return config


def checkpoint_model_type(model_id: str, revision: str | None = None) -> str | None:
    """`model_type` from the checkpoint's config.json; None when it names none."""
    value = checkpoint_config(model_id, revision).get("model_type")
    return value if isinstance(value, str) else None


def checkpoint_dtype(model_id: str, revision: str | None = None) -> str:
    """The dtype config.json records (what from_pretrained loads without a dtype: transformers 5's "auto")."""
    config = checkpoint_config(model_id, revision)
    value = config.get("dtype") or config.get("torch_dtype") or (config.get("text_config") or {}).get("dtype")
    return str(value) if value else "float32"  # transformers' own fallback when the config names none


def family_of_model_type(model_type: str | None, model_id: str) -> FamilySpec:
    """The family whose checkpoints have `model_type` (lm-eval's `--model hf`); "did you mean" otherwise."""
    import difflib

    from .families import FAMILIES

    known = {family_model_type(f): f for f in FAMILIES.values()}
    if model_type in known:
        return known[model_type]
    close = difflib.get_close_matches(str(model_type), known, n=2, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise ModelError(f"{model_id}: config.json model_type {model_type!r} is not a family this harness drives{hint} "
                     f"(known: {', '.join(sorted(known))})")


def check_model_type(spec: FamilySpec, model_id: str, revision: str | None) -> None:
    """Refuse a checkpoint of another family before loading it (transformers would re-initialise the parts
    that do not match, with only a warning, and every answer would be noise)."""
    from .released import refuse_released

    refuse_released(model_id)  # by name first: a Hub id needs no download to be refused
    found, want = checkpoint_model_type(model_id, revision), family_model_type(spec)
    refuse_released(model_id, found)
    if found is not None and found != want:
        raise ModelError(f"{model_id} is a {found!r} checkpoint (config.json model_type), but {spec.name} loads "
                         f"{want!r} checkpoints; use --model hf to pick the family from model_type")


def auto_model(model_id: str, *, revision: str | None = None, **kwargs: Any) -> HFAudioLM:
    """`--model hf --model-arg pretrained=PATH_OR_ID`: the family picked from config.json `model_type`."""
    from .released import refuse_released

    refuse_released(model_id)  # by name first: a Hub id needs no download to be refused
    model_type = checkpoint_model_type(model_id, revision)
    refuse_released(model_id, model_type)
    spec = family_of_model_type(model_type, model_id)
    return HFAudioLM(model_id, spec, revision=revision, **kwargs)


def check_requirements(spec: FamilySpec) -> None:
    """Raise a one-line install hint for a package the family cannot run without (stand-ins cover the rest)."""
    soft = {"torchvision", "timm"}  # only unused image/video parts need them (harness.models.frontends)
    for req in spec.requires:
        if req.module not in soft and not importable(req.module):
            extra = f" (or pip install -e '.[{spec.extra}]')" if spec.extra else ""
            raise ModelError(f"{spec.name} needs {req.module} for {req.why}: pip install '{req.pip}'{extra}")


def set_active_lora(model: Any, name: str | None) -> list[str]:
    """Enable the PEFT LoRA layers of `model` (and make `name` the active adapter); the active adapter names.

    What transformers' set_adapter()/enable_adapters() do, done on the layers directly: transformers 5.24
    gates those two on peft>=0.22, which PyPI does not have yet (0.21.2), while load_adapter() works.
    """
    from peft.tuners.tuners_utils import BaseTunerLayer

    active: set[str] = set()
    for module in model.modules():
        if isinstance(module, BaseTunerLayer):
            module.enable_adapters(True)
            if name is not None:
                module.set_adapter(name)
            active.update(module.active_adapters)
    return sorted(active)


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def protocol_deviations(spec: FamilySpec, dtype: Any, own_dtype: Any, attn_implementation: str | None,
                        tf32: bool) -> list[str]:
    """The speed opt-ins a run took that its protocol does not (recorded as model_info["not_paper_protocol"],
    flagged by the report): a dtype other than the protocol's own (`own_dtype`: the family's, or the
    checkpoint's under the paper protocol where the paper loaded it so), TF32 matmuls, another attention kernel."""
    out = []
    if dtype != own_dtype:
        out.append(f"dtype {dtype_name(dtype)} (the protocol's: {dtype_name(own_dtype)})")
    if tf32:
        out.append("tf32 matmuls")
    if attn_implementation is not None and attn_implementation != spec.attn_implementation:
        out.append(f"attn_implementation {attn_implementation} (the family's: {spec.attn_implementation})")
    return out


def enable_tf32() -> None:
    """TF32 for float32 matmuls and convolutions on Ampere+ GPUs (~10 mantissa bits: faster, not exact)."""
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True


class HFAudioLM(BaseAudioLM):
    """A transformers audio LM: greedy generation, choice scoring and hidden states, batched by the base."""

    kind = "hf"
    supports_hidden_states = True
    supports_compact_hidden = True
    supports_adapters = True

    def __init__(
        self,
        model_id: str,
        family: FamilySpec | str,
        *,
        name: str | None = None,
        device: Any = None,
        dtype: Any = None,
        batch_size: int = 8,
        trust_remote_code: bool = False,
        attn_implementation: str | None = None,
        tf32: bool = False,
        fast_encoder: bool = False,
        feature_device: str | None = None,
        stop_strings: list[str] | tuple[str, ...] | None = None,
        revision: str | None = None,
        protocol: str | None = None,
        model: Any = None,
        processor: Any = None,
    ) -> None:
        super().__init__(name or model_id, batch_size=batch_size)
        import transformers

        from .released import refuse_released

        refuse_released(model_id)  # before any config or weight is read
        self.spec = get_family(family) if isinstance(family, str) else family
        if not self.spec.batch_invariant and batch_size > 1:
            log.info("%s: one prompt per forward (padding in a batch changes %s's audio features)",
                     self.name, self.spec.name)
            self.batch_size = self.stats["batch_size"] = 1
        self.model_id = model_id
        self.revision = revision or self.spec.revision
        self.protocol = self._protocol(protocol)
        paper = self.spec.paper if self.protocol == "paper" else None
        from_checkpoint = paper is not None and paper.dtype == "checkpoint" and model is None
        asked_dtype = dtype
        if dtype is None and from_checkpoint:
            dtype = checkpoint_dtype(model_id, self.revision)
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype or self.spec.dtype, self.device)
        # what this run changes from its protocol's own choices (speed opt-ins; the report flags them)
        own_dtype = self.dtype if asked_dtype is None else resolve_dtype(
            checkpoint_dtype(model_id, self.revision) if from_checkpoint else self.spec.dtype, self.device)
        self.deviations = protocol_deviations(self.spec, self.dtype, own_dtype, attn_implementation, tf32)
        if tf32:
            enable_tf32()
        # trust_remote_code is only ever what the caller passed: never switched on here.
        hub = {"trust_remote_code": trust_remote_code, "revision": self.revision}
        if model is None:
            check_attn_implementation(attn_implementation, self.device)
            check_model_type(self.spec, model_id, self.revision)
            check_weight_files(local_folder(model_id, self.revision))  # a truncated file: one line, not a traceback
        if model is None or processor is None:
            check_requirements(self.spec)
        if processor is None:
            processor = load_processor(self.spec, model_id, hub)
        if model is None:
            with without_towers(self.spec):
                model = getattr(transformers, self.spec.model_class).from_pretrained(
                    model_id,
                    dtype=self.dtype,
                    attn_implementation=attn_implementation or self.spec.attn_implementation,
                    device_map=None if self.device.type == "cpu" else str(self.device),
                    **self.spec.load_kwargs,
                    **hub,
                )
            self._activate_adapters(model, model_id, hub)
        if self.spec.submodule:
            model = getattr(model, self.spec.submodule)
        self.model = model.to(device=self.device, dtype=self.dtype).eval()
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.tokenizer.padding_side = "left"  # every row ends at the same index: the answer position
        self._template_owner = self._find_template()
        self.audio_token_id = _audio_token_id(self.model.config, processor)
        self.fast = build_fast_audio(self.model, self.spec.fast_encoder) if fast_encoder else None
        # generate mode too, only where greedy strings are proven equal to the full window's (fast_encoder.py)
        self.fast_generate = self.fast is not None and self.spec.name in GENERATE_EXACT
        self.stop_strings = tuple(stop_strings or ())
        if fast_encoder and self.fast is None:
            log.warning("%s: no proven fast encoder for family %s; using the stock forward", self.name, self.spec.name)
        # Where the processor computes log-mels ("cuda" moves 30 s STFTs off the CPU); None: the CPU.
        self.feature_device = feature_device
        self._keeps_logits = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        self._choice_memo: dict[str, tuple[list[int], str]] = {}
        # prepare_prompts' processor outputs, keyed by the prompt objects of a batch; the lock serialises the
        # tokenizer/processor between the front-end thread and the model thread
        self._ready: OrderedDict[tuple[int, ...], tuple[list[Prompt], dict[str, torch.Tensor]]] = OrderedDict()
        self._frontend_lock = threading.RLock()

    def _protocol(self, protocol: str | None) -> str:
        """"paper" (the default for the families the paper ran) or "card" (the model card's settings)."""
        from .external import check_protocol_name

        if protocol is None:
            return "paper" if self.spec.paper is not None else "card"
        check_protocol_name(protocol, self.spec.name)
        if protocol == "paper" and self.spec.paper is None:
            raise ModelError(f"{self.spec.name} was not evaluated in the paper: its only protocol is card (the model "
                             "card's settings)")
        return protocol

    # ---- TrainableAudioLM: what fine-tuning reads off the family spec ---------------------------------
    @property
    def supports_training(self) -> bool:
        """Prompt + answer can be rendered as text around the audio slots (not for chat-style families)."""
        return self.spec.input_style == "render"

    @property
    def max_audios(self) -> int | None:  # type: ignore[override]
        return self.spec.max_audios

    @property
    def decoder_path(self) -> str:
        return self.spec.decoder_path

    @property
    def lm_head_path(self) -> str:
        return self.spec.lm_head_path

    @property
    def family(self) -> str:
        return self.spec.name

    @property
    def audio_stack(self) -> AudioStack | None:
        """Where the audio encoder and projector sit (PCLM attaches there); None for families without the seam."""
        return self.spec.audio_stack

    def provenance(self) -> dict[str, Any]:
        """results.json "model_info": the checkpoint (absolute folder or Hub id, requested revision, the commit
        it resolved to, a sha256 over its weights), family, dtype, device, the attached adapter (absolute path,
        sha256), the adapters the model reports active, and the library versions that ran it."""
        from importlib.metadata import version

        if "_weights" not in self.__dict__:  # hashed once per model, not per call
            where = getattr(self, "checkpoint", self.model_id)  # a tiny model's saved folder
            commit = getattr(self.model.config, "_commit_hash", None) or hub_commit(where, self.revision)
            self._weights = {"commit_sha": commit, **weights_digest(local_folder(where, commit or self.revision))}
            self._adapter = adapter_digest(getattr(self, "adapter", None))
        local = Path(self.model_id).expanduser()
        return {
            "kind": self.kind, "model_id": str(local.resolve()) if local.is_dir() else self.model_id,
            "family": self.spec.name, "revision": self.revision, "protocol": self.protocol, **self._weights,
            "dtype": str(self.dtype).removeprefix("torch."), "device": str(self.device), **self._adapter,
            "active_adapters": active_lora_adapters(self.model),
            # which speed paths ran: the fast encoder per mode (off where not proven exact), stop strings
            "fast_encoder": {"choices": self.fast is not None, "generate": self.fast_generate},
            "stop_strings": list(self.stop_strings),
            "attn_implementation": getattr(self.model.config, "_attn_implementation", None),
            "not_paper_protocol": list(self.deviations),
            "versions": {p: version(p) for p in ("torch", "transformers", "vocalgrad")},
        }

    def base_revision(self) -> str | None:
        """The commit the base weights came from (Hub-resolved), else the family's pinned revision."""
        return getattr(self.model.config, "_commit_hash", None) or self.spec.revision

    def _activate_adapters(self, model: Any, model_id: str, hub: dict[str, Any]) -> None:
        """Load and activate the LoRA the published inference uses (Phi-4: `speech-lora`, set active;
        Granite: the root LoRA transformers loads itself, enabled as the model's generate() does for audio)."""
        spec = self.spec
        self.active_adapters: list[str] = []
        if spec.adapter is not None:
            kwargs = {"subfolder": spec.adapter.subfolder, "revision": hub["revision"]}
            try:
                model.load_adapter(model_id, adapter_name=spec.adapter.name, adapter_kwargs=kwargs)
            except (OSError, ValueError) as exc:
                raise ModelError(f"{spec.name}: cannot load the {spec.adapter.subfolder!r} adapter of {model_id}"
                                 f" (revision {hub['revision']}): {exc}") from None
            self.active_adapters = set_active_lora(model, spec.adapter.name)
            if self.active_adapters != [spec.adapter.name]:
                raise ModelError(f"{spec.name}: adapter {spec.adapter.name!r} is not active ({self.active_adapters})")
        if spec.builtin_lora and getattr(model.config, "has_lora_adapter", False):
            if not getattr(model, "_hf_peft_config_loaded", False):
                raise ModelError(f"{spec.name}: {model_id} says it has a LoRA adapter but none was loaded "
                                 "(adapter_config.json missing beside config.json, or peft not installed)")
            self.active_adapters = set_active_lora(model, None)

    def _find_template(self) -> Any:
        """The object whose chat template renders prompts: as the family's model card does, else whichever
        of processor and tokenizer has one."""
        owners = [self.processor, self.tokenizer]
        if self.spec.template_source == "tokenizer":
            owners.reverse()
        for owner in owners:
            if getattr(owner, "chat_template", None):
                return owner
        if self.spec.input_style == "chat":
            return self.processor  # mistral-common builds the prompt in code
        raise ModelError(f"{self.spec.name}: neither the processor nor the tokenizer of {self.model_id} has a chat template")

    def auto_batch(self, start: int) -> None:
        """`--batch-size auto`, capped at 1 for families whose audio features depend on the batch's padding."""
        super().auto_batch(start if self.spec.batch_invariant else 1)

    @property
    def pad_token_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    # ---- prompt rendering -----------------------------------------------------------------------------
    def _conversation(self, prompt: Prompt, answer: str | None = None) -> list[dict]:
        """The chat messages for one prompt (segments in order), optionally with an assistant answer."""
        spec = self.spec
        messages: list[dict] = []
        if spec.system_prompt is not None:
            messages.append({"role": "system", "content": spec.system_prompt})
        if spec.content_style == "string":
            user: Any = "".join(s if isinstance(s, str) else spec.audio_placeholder for s in prompt.segments)
        else:
            user = [
                {"type": "text", "text": s} if isinstance(s, str) else self._audio_item(s) for s in prompt.segments
            ]
        messages.append({"role": "user", "content": user})
        if answer is not None:
            messages.append({"role": "assistant", "content": answer})
        return messages

    def _audio_item(self, clip: AudioClip) -> dict:
        if self.spec.input_style == "render":
            return {"type": "audio", "audio": _AUDIO_STUB}
        x = mono_at(clip, self.spec.sampling_rate)
        if self.spec.chat_audio_field == "base64":
            return {"type": "audio", "base64": wav_base64(x, self.spec.sampling_rate)}
        return {"type": "audio", "audio": x}

    def _render(self, messages: list[dict], generation_prompt: bool) -> str:
        return self._template_owner.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt
        )

    def clip_front_end(self) -> ClipsAt:
        """The per-clip CPU work DataLoader workers may do ahead (picklable): resampling to the family's rate."""
        return ClipsAt(self.spec.sampling_rate)

    def prepare_prompts(self, prompts: list[Prompt]) -> list[Prompt]:
        """The CPU front end ahead of the model (called from the runner's front-end thread): clips resampled to
        the family's rate, then the template and processor (log-mels) run for each batch the next *_items call
        on these prompts will form; that call then finds its inputs ready (identical tensors, same code)."""
        ready = list(map(self.clip_front_end(), prompts))
        for batch in self.planned_batches(ready):
            try:
                inputs = self._encode_cpu(batch, None)
            except Exception:  # noqa: BLE001 - the model call re-raises it and isolates the failing item
                continue
            with self._frontend_lock:
                self._ready[tuple(map(id, batch))] = (batch, inputs)
                while len(self._ready) > _READY_BATCHES:  # batches an OOM split never asked for: bounded
                    self._ready.popitem(last=False)
        return ready

    def _encode(self, prompts: list[Prompt], suffixes: list[str] | None = None) -> dict[str, torch.Tensor]:
        """Processor outputs for a batch (left padded), on the model's device and dtype (prepared ahead by
        prepare_prompts when it ran on exactly these prompt objects)."""
        found = None
        if not suffixes:
            with self._frontend_lock:
                found = self._ready.pop(tuple(map(id, prompts)), None)
        if found is not None and all(a is b for a, b in zip(found[0], prompts, strict=True)):
            inputs = found[1]
        else:
            inputs = self._encode_cpu(prompts, suffixes)
        out = {}
        for k, v in inputs.items():
            v = v.to(self.device)
            out[k] = v.to(self.dtype) if v.is_floating_point() else v
        return out

    def _encode_cpu(self, prompts: list[Prompt], suffixes: list[str] | None) -> dict[str, torch.Tensor]:
        """The processor's tensors for a batch, before any move to the model's device."""
        for p in prompts:
            self._check_audio_limits(p)
            self._check_text_length(p)
        with self._frontend_lock:  # fast tokenizers refuse concurrent use (padding state is mutated per call)
            inputs = self._process(prompts, suffixes)
        return {k: v for k, v in dict(inputs).items() if isinstance(v, torch.Tensor)}

    def _process(self, prompts: list[Prompt], suffixes: list[str] | None) -> Any:
        if self.spec.input_style == "chat":
            if suffixes:
                raise ModelError(f"{self.spec.name}: prompt+answer rows need a 'render' family")
            inputs = self.processor.apply_chat_template(
                [self._conversation(p) for p in prompts],
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
                return_tensors="pt",
                processor_kwargs={"padding": True, **self.spec.processor_kwargs},
            )
        else:
            inputs = self._process_rendered(prompts, suffixes)
        return inputs

    def _check_audio_limits(self, prompt: Prompt) -> None:
        """ModelError for more clips, or a longer clip, than the family's front end takes (never truncated)."""
        limit, longest = self.spec.max_audios, self.spec.max_audio_seconds
        if limit is not None and len(prompt.audios) > limit:
            raise ModelError(f"{self.spec.name} takes at most {limit} clip(s) per prompt", prompt.clip_id)
        for clip in prompt.audios:  # the published front end would truncate it silently
            seconds = len(clip.array) / clip.sampling_rate
            if longest is not None and seconds > longest + 1e-6:
                raise ModelError(f"{self.spec.name} encodes at most {longest:g} s per clip; this one is "
                                 f"{seconds:.2f} s", prompt.clip_id)

    def context_length(self) -> int | None:
        """The language model's context in tokens (config max_position_embeddings, of its text config when it
        has one); None when the config names none."""
        cfg = self.model.config
        thinker = getattr(cfg, "thinker_config", None)
        for c in (getattr(cfg, "text_config", None), getattr(thinker, "text_config", None), cfg):
            n = getattr(c, "max_position_embeddings", None)
            if isinstance(n, int) and n > 0:
                return n
        return None

    def _check_text_length(self, prompt: Prompt) -> None:
        """ModelError for a prompt whose text alone is longer than the model's context: an error row for that
        item, not minutes of attention over a prompt the model would only see truncated or fail on."""
        context = self.context_length()
        text = "".join(s for s in prompt.segments if isinstance(s, str))
        if context is None or len(text.encode("utf-8")) <= context:  # byte-level tokenizers: <= 1 token per byte
            return
        with self._frontend_lock:
            n = len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if n > context:
            raise ModelError(f"{self.spec.name}: the prompt's text is {n:,} tokens, more than the model's "
                             f"context of {context:,}", prompt.clip_id)

    def _process_rendered(self, prompts: list[Prompt], suffixes: list[str] | None) -> Any:
        """Template-rendered texts (plus answer suffixes) and the clips through the processor."""
        texts = [self._render(self._conversation(p), True) for p in prompts]
        if suffixes:
            texts = [t + s for t, s in zip(texts, suffixes, strict=True)]
        # Padding goes to the tokenizer only: Whisper-style feature extractors must keep their 30 s padding.
        text_kwargs: dict[str, Any] = {"padding": True, "padding_side": "left"}
        bos = getattr(self.tokenizer, "bos_token", None)
        if bos and all(t.startswith(bos) for t in texts):
            text_kwargs["add_special_tokens"] = False  # the template already wrote BOS
        kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "text_kwargs": text_kwargs}
        audios = [mono_at(a, self.spec.sampling_rate) for p in prompts for a in p.audios]
        if audios:
            kwargs[self.spec.audio_kwarg] = audios
            kwargs["sampling_rate"] = self.spec.sampling_rate
            if self.feature_device:
                kwargs["audio_kwargs"] = {"device": self.feature_device}
        return self.processor(**kwargs, **self.spec.processor_kwargs)

    # ---- training and adapters (finetune/) ------------------------------------------------------------
    def _end_of_turn(self) -> tuple[str, int] | None:
        """(text, id) of the token that closes the assistant turn as the template renders it, if any."""
        if "_eot" not in self.__dict__:
            probe = Prompt(("x",))
            word, text = "increase", self._choice_tokens("increase")[1]
            full = self._render(self._conversation(probe, word), False)
            after = full[len(self._render(self._conversation(probe), True)) + len(text) :]
            eos = self.model.generation_config.eos_token_id
            ids = eos if isinstance(eos, list) else [eos] if eos is not None else []
            found = None
            for tid in [*ids, self.tokenizer.eos_token_id]:
                tok = self.tokenizer.convert_ids_to_tokens(int(tid)) if tid is not None else None
                if tok and after.startswith(tok):
                    found = (tok, int(tid))
                    break
            self._eot = found
        return self._eot

    def training_inputs(self, prompts: list[Prompt], answers: list[str], *,
                        end_of_turn: bool = True) -> dict[str, torch.Tensor]:
        """Inputs for prompt + assistant answer, `labels` = -100 everywhere but the answer's tokens.

        The answer is tokenised exactly as choice scoring reads it (so training maximises what `--mode
        choices` scores); with end_of_turn the token closing the assistant turn is a target too, so
        generation learns to stop after the word.
        """
        eot = self._end_of_turn() if end_of_turn else None
        targets, suffixes = [], []
        for answer in answers:
            ids, text = self._choice_tokens(answer)
            targets.append(ids + ([eot[1]] if eot else []))
            suffixes.append(text + (eot[0] if eot else ""))
        inputs = self._encode(prompts, suffixes=suffixes)
        ids = inputs["input_ids"]
        labels = torch.full_like(ids, -100)
        for b, want in enumerate(targets):
            n = len(want)
            # Left padding: every row ends with its answer, so the targets are the last n positions.
            if ids[b, -n:].tolist() != want:
                raise ModelError(f"{self.spec.name}: answer tokens shift when appended to the prompt", prompts[b].clip_id)
            labels[b, -n:] = ids[b, -n:]
        inputs["labels"] = labels
        if self.spec.position_ids_from_mask:
            inputs["position_ids"] = (inputs["attention_mask"].long().cumsum(-1) - 1).clamp(min=0)
        return inputs

    def load_adapter(self, path: str) -> None:
        """Attach a saved PEFT LoRA adapter to the wrapped model in place (unmerged: logits as trained)."""
        from peft import PeftModel
        from peft.tuners.tuners_utils import BaseTunerLayer

        check_adapter_family(path, self.spec.name, (self.model_id, str(getattr(self, "checkpoint", "")), self.name),
                             lambda base: family_of_model_type(checkpoint_model_type(base), base).name)
        layers = [m for m in self.model.modules() if isinstance(m, BaseTunerLayer)]
        # The checkpoint's own adapters in use (Phi-4's speech LoRA, Granite's LLM LoRA) stay on beside ours,
        # which gets a name of its own (Granite's is "default"), as vocalgrad-finetune trained it.
        theirs = sorted({a for m in layers for a in m.active_adapters})
        ours = "vocalgrad" if theirs else "default"
        peft_model = PeftModel.from_pretrained(self.model, str(path), adapter_name=ours, is_trainable=False)
        # PEFT injects the LoRA layers into self.model itself; keep the transformers class on the surface.
        self.model = peft_model.base_model.model.eval()
        if theirs:
            for m in self.model.modules():
                if isinstance(m, BaseTunerLayer) and (names := [a for a in (*theirs, ours) if a in m.lora_A]):
                    m.set_adapter(names)
            self.active_adapters = [*theirs, ours]
        self.adapter = str(path)
        self.__dict__.pop("_weights", None)  # provenance names the adapter now attached
        self._attach_saved_pclm(path)

    def _attach_saved_pclm(self, path: str) -> None:
        """The prompt-conditioned layer mixer saved beside the LoRA (finetune --method pclm), if there is one."""
        from .pclm import attach_saved, protocol_deviations, saved_folder

        folder = saved_folder(path)
        if folder is not None:
            attach_saved(self, folder)
            # a repair trained off the paper's protocol (LoRA for its full-LLM stages, ...): flagged like --dtype
            self.deviations = [*self.deviations, *protocol_deviations(folder)]

    # ---- forward passes -------------------------------------------------------------------------------
    def _fast_embeds(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Token embeddings with the fast encoder's audio features scattered into the audio positions."""
        ids = inputs["input_ids"]
        embeds = self.model.get_input_embeddings()(ids)
        if "input_features" not in inputs:
            return embeds
        feats = torch.cat(self.fast(inputs["input_features"], inputs[self.spec.feature_mask_key]))
        slots = ids == self.audio_token_id
        if int(slots.sum()) != feats.shape[0]:
            raise ModelError(f"fast encoder made {feats.shape[0]} audio features for {int(slots.sum())} slots")
        return embeds.masked_scatter(slots[..., None], feats.to(embeds.dtype))

    @torch.inference_mode()
    def _forward_prompt(self, inputs: dict[str, torch.Tensor], use_cache: bool, hidden: bool) -> PromptPass:
        mask = inputs["attention_mask"]
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        extra: dict[str, Any] = {"use_cache": use_cache, "output_hidden_states": hidden}
        if self.spec.position_ids_from_mask:
            extra["position_ids"] = positions
        if self.fast is not None:
            decoder = _resolve(self.model, self.spec.decoder_path)
            out = decoder(inputs_embeds=self._fast_embeds(inputs), attention_mask=mask, **extra)
            last = _resolve(self.model, self.spec.lm_head_path)(out.last_hidden_state[:, -1])
        else:
            if self._keeps_logits:
                extra["logits_to_keep"] = 1  # the (B, T, V) logits of a 7B vocab are pure waste here
            out = self.model(**inputs, **extra)
            last = out.logits[:, -1]
        cache = out.cache if hasattr(out, "cache") else getattr(out, "past_key_values", None)
        return PromptPass(last, mask, positions[:, -1], cache, getattr(out, "hidden_states", None))

    # ---- BaseAudioLM hooks ------------------------------------------------------------------------------
    @torch.inference_mode()
    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int) -> list[str]:
        inputs = self._encode(prompts)
        config = copy.deepcopy(self.model.generation_config)
        config.do_sample = False
        if self.protocol != "paper" or self.spec.paper is None or self.spec.paper.generation != "checkpoint":
            # Greedy decoding as the model cards show; sampling knobs from the checkpoint's config must not leak
            # in. (The paper's AF3 run kept the checkpoint's config and set only do_sample=False.)
            config.num_beams = 1
            config.temperature = config.top_p = config.top_k = None
            config.repetition_penalty = None
        config.max_new_tokens, config.max_length = max_new_tokens, None
        if config.pad_token_id is None:
            config.pad_token_id = self.pad_token_id
        if config.eos_token_id is None:  # e.g. a submodule (Omni's thinker) without its own generation config
            config.eos_token_id = self.tokenizer.eos_token_id
        generate = self.model.generate
        if self.spec.builtin_lora:
            # Granite's generate() only re-enables its LoRA for audio inputs (done once at load, every prompt
            # has audio) through a peft-version-gated call; the GenerationMixin underneath is the same decoding.
            from transformers import GenerationMixin

            generate = GenerationMixin.generate.__get__(self.model)
        gen_inputs: dict[str, Any] = inputs
        if self.fast_generate:
            # The audio embeddings from the valid mel frames only (not 30 s of padding); the ids stay, so the
            # output still starts with the prompt and the checkpoint's generation config sees the same text.
            gen_inputs = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"],
                          "inputs_embeds": self._fast_embeds(inputs)}
        stops = self._stopping_criteria(inputs["input_ids"].shape[1])
        if stops:
            gen_inputs = {**gen_inputs, "stopping_criteria": stops}
        out = generate(**gen_inputs, generation_config=config, **self.spec.generate_kwargs)
        new_tokens = out[:, inputs["input_ids"].shape[1] :]
        with self._frontend_lock:
            texts = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return [cut_at_stop(t, self.stop_strings) for t in texts] if self.stop_strings else texts

    def _stopping_criteria(self, prompt_len: int) -> Any:
        """Criteria that end generation for a row once its new text holds a stop string (EOS already ends a
        row in transformers; a batch ends when every row has ended). None without stop strings."""
        if not self.stop_strings:
            return None
        from transformers import StoppingCriteriaList

        return StoppingCriteriaList([RowStopStrings(self.tokenizer, self.stop_strings, prompt_len, self._frontend_lock)])

    def _choice_token_ids(self, choices: tuple[str, ...]) -> list[list[int]]:
        return [self._choice_tokens(c)[0] for c in choices]

    def _choice_tokens(self, choice: str) -> tuple[list[int], str]:
        """Token ids of a choice exactly as the template renders it after the generation prompt, and that text."""
        if choice in self._choice_memo:
            return self._choice_memo[choice]
        with self._frontend_lock:  # the tokenizer is shared with the front-end thread
            return self._choice_tokens_unlocked(choice)

    def _choice_tokens_unlocked(self, choice: str) -> tuple[list[int], str]:
        encode = self.tokenizer.encode
        if self.spec.input_style == "chat":
            result = (list(encode(choice, add_special_tokens=False)), choice)
        else:
            probe = Prompt(("x",))
            prefix = self._render(self._conversation(probe), True)
            full = self._render(self._conversation(probe, choice), False)
            rest = full[len(prefix) :] if full.startswith(prefix) else ""
            at = rest.find(choice)
            if at < 0:
                raise ModelError(f"{self.spec.name}: the chat template does not render {choice!r} after its prompt")
            text = rest[: at + len(choice)]  # e.g. an empty think block some templates insert, then the word
            head = encode(prefix, add_special_tokens=False)
            both = encode(prefix + text, add_special_tokens=False)
            # Tokenise in context so merges across the boundary match what the model would have produced.
            ids = both[len(head) :] if both[: len(head)] == head else encode(text, add_special_tokens=False)
            result = (list(ids), text)
        self._choice_memo[choice] = result
        return result

    def _prompt_logits(self, prompts: list[Prompt], keep_state: bool) -> tuple[torch.Tensor, PromptPass]:
        state = self._forward_prompt(self._encode(prompts), use_cache=keep_state, hidden=False)
        return state.last_logits, state

    def _score_batch(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        multi = any(len(t) > 1 for t in self._choice_token_ids(choices))
        if multi and not self.spec.cache_continuation:
            return self._score_rows(prompts, choices)
        return super()._score_batch(prompts, choices)

    @torch.inference_mode()
    def _continuation_logprobs(self, state: PromptPass, token_ids: list[list[int]]) -> torch.Tensor:
        """Feed tokens 1..n-1 of every choice after the cached prompt (rows b*C + c) in one forward."""
        n_rows, n_choices = state.last_logits.shape[0], len(token_ids)
        width = max(len(t) for t in token_ids) - 1
        feed = torch.full((n_choices, width), self.pad_token_id, dtype=torch.long)
        target = torch.zeros((n_choices, width), dtype=torch.long)
        valid = torch.zeros((n_choices, width), dtype=torch.bool)
        for c, t in enumerate(token_ids):
            feed[c, : len(t) - 1] = torch.tensor(t[:-1])
            target[c, : len(t) - 1] = torch.tensor(t[1:])
            valid[c, : len(t) - 1] = True
        dev = self.device
        feed, target, valid = (x.to(dev).repeat(n_rows, 1) for x in (feed, target, valid))
        state.cache.batch_repeat_interleave(n_choices)
        mask = torch.cat([state.attention_mask.repeat_interleave(n_choices, 0), valid.long()], dim=1)
        positions = state.last_position.repeat_interleave(n_choices)[:, None] + 1 + torch.arange(width, device=dev)
        extra = {"position_ids": positions} if self.spec.position_ids_from_mask else {}
        out = self.model(input_ids=feed, attention_mask=mask, cache=state.cache, use_cache=True, **extra)
        logp = torch.log_softmax(out.logits.float(), dim=-1).gather(-1, target[..., None])[..., 0]
        return (logp * valid).sum(-1).view(n_rows, n_choices)

    @torch.inference_mode()
    def _score_rows(self, prompts: list[Prompt], choices: tuple[str, ...]) -> np.ndarray:
        """Fallback for families without cache continuation: one row per (prompt, choice), one forward."""
        tokens = [self._choice_tokens(c) for c in choices]
        rows = [p for p in prompts for _ in choices]
        inputs = self._encode(rows, suffixes=[text for _ in prompts for _, text in tokens])
        logits = self.model(**inputs).logits
        ids = inputs["input_ids"]
        scores = np.zeros((len(prompts), len(choices)))
        for r in range(len(rows)):
            want = tokens[r % len(choices)][0]
            n = len(want)
            if ids[r, -n:].tolist() != want:
                raise ModelError(f"{self.spec.name}: choice tokens shift when appended to the prompt")
            logp = torch.log_softmax(logits[r, -n - 1 : -1].float(), dim=-1)
            scores[r // len(choices), r % len(choices)] = float(logp.gather(-1, ids[r, -n:, None]).sum())
        return scores

    def _hidden_batch(self, prompts: list[Prompt], compact: bool = False) -> HiddenStates:
        inputs = self._encode(prompts)
        path, where = self.spec.pre_llm_from
        try:
            module = _resolve(self.model, path)
        except AttributeError:
            raise ModelError(f"{self.name}: no module {path!r} to read the pre-LLM audio embeddings from") from None
        captured: list[Any] = []
        # A hook, not a second pass: the embeddings the decoder receives, as this very forward computes them.
        if where == "input":
            hook = module.register_forward_pre_hook(
                lambda m, a, k: captured.append(k.get("inputs_embeds")), with_kwargs=True)
        else:
            hook = module.register_forward_hook(
                lambda m, a, o: captured.append(o if isinstance(o, torch.Tensor) else getattr(o, "last_hidden_state", None)))
        try:
            state = self._forward_prompt(inputs, use_cache=False, hidden=True)
        finally:
            hook.remove()
        if state.hidden is None:
            raise ModelError(f"{self.name}: the forward returned no hidden states")
        ids = inputs["input_ids"]
        clips = [a for p in prompts for a in p.audios]
        rule = SLOT_RULES.get(self.spec.audio_slots)
        slots = rule(self, inputs, clips) if rule is not None and clips else None
        embeds = captured[0] if captured else None
        if not isinstance(embeds, torch.Tensor) or tuple(embeds.shape[:2]) != tuple(ids.shape):
            raise ModelError(f"{self.name}: {path!r} did not see the merged input embeddings ({where}); "
                             "cannot read the pre-LLM audio representation")
        # Gemma 3n carries AltUp streams through its layers, (n_streams, B, T, d): the active stream is the
        # one its layers predict and correct (config.altup_active_idx), what the next layer reads as its state.
        config = getattr(self.model.config, "text_config", self.model.config)
        stream = getattr(config, "altup_active_idx", 0)
        hidden = [h[stream] if h.dim() == 4 else h for h in state.hidden]
        out = HiddenStates()
        first_clip = 0
        for b in range(len(prompts)):
            keep = state.attention_mask[b].bool()
            row = ids[b, keep]
            audio_pos = (row == self.audio_token_id).nonzero()[:, 0].cpu().numpy()
            n_clips = len(prompts[b].audios)
            if slots is not None:  # only the slots that carry the clip, never the family's padding slots
                audio_pos = carrying_positions(audio_pos, slots[first_clip : first_clip + n_clips], prompts[b].clip_id)
            first_clip += n_clips
            output = int(keep.sum()) - 1
            text = self._text_positions(prompts[b], row.tolist())
            at_audio = torch.as_tensor(audio_pos, device=embeds.device, dtype=torch.long)
            if compact:
                out.positions.append(_layers_at(hidden, b, keep, {"output": output, **quarter_positions(audio_pos), **text}))
                out.pooled.append({} if len(audio_pos) == 0 else {
                    "pre_llm": pool_on_device(embeds[b, keep][at_audio]),
                    "late_llm": pool_on_device(hidden[-1][b, keep.to(hidden[-1].device)][at_audio.to(hidden[-1].device)])})
            else:
                out.decoder.append(torch.stack([h[b, keep] for h in hidden]).float().cpu().numpy())
                out.pre_llm_audio.append(embeds[b, keep][at_audio].float().cpu().numpy())
            out.audio_positions.append(audio_pos)
            out.output_position.append(output)
            out.text_positions.append(text)
        return out

    def _text_positions(self, prompt: Prompt, ids: list[int]) -> dict[str, int]:
        """Positions of the attribute word's last token and of the last two tokens of the last text segment."""
        encode = self.tokenizer.encode
        found: dict[str, int] = {}
        word = prompt.meta.get("attribute")
        if word:
            # In running text the word follows a space; after a newline or an audio segment it may not.
            for form in (" " + word, word):
                end = _find_last(ids, encode(form, add_special_tokens=False))
                if end is not None:
                    found["attribute"] = end
                    break
        texts = [s for s in prompt.segments if isinstance(s, str) and s.strip()]
        if texts:
            tail = encode(texts[-1].rstrip(), add_special_tokens=False)[-3:]
            end = _find_last(ids, tail)
            if end is not None and end >= 1:
                found["query-2"], found["query-1"] = end - 1, end
        return found


def _layers_at(hidden: list[Any], b: int, keep: Any, named: dict[str, int]) -> dict[str, np.ndarray]:
    """Every layer of row b at each named position (into the unpadded row), gathered before the copy."""
    names = list(named)
    stacked = []
    for h in hidden:  # a layer may sit on another device (device_map="auto")
        at = torch.as_tensor([named[n] for n in names], device=h.device, dtype=torch.long)
        stacked.append(h[b, keep.to(h.device)][at].to(hidden[0].device))
    values = torch.stack(stacked).float().cpu().numpy()  # (n_layers + 1, P, d)
    return {n: values[:, i] for i, n in enumerate(names)}


class ClipsAt:
    """Prompts with every clip mono float32 at `rate`: what mono_at does inside the model call, done ahead
    (the model's own mono_at then returns the samples unchanged, so the inputs are identical)."""

    def __init__(self, rate: int) -> None:
        self.rate = rate

    def __call__(self, prompt: Prompt) -> Prompt:
        rate = self.rate
        if all(a.sampling_rate == rate and a.array.ndim == 1 and a.array.dtype == np.float32 for a in prompt.audios):
            return prompt
        return Prompt(tuple(AudioClip(mono_at(s, rate), rate) if isinstance(s, AudioClip) else s
                            for s in prompt.segments), prompt.clip_id, prompt.meta)


class RowStopStrings:
    """A transformers stopping criterion: True per row once its generated text contains a stop string.

    Rows that stop are padded by generate() while the others go on, and generate() returns as soon as every
    row has stopped (by this or by EOS); the text after the stop string is cut off by the caller."""

    def __init__(self, tokenizer: Any, stops: tuple[str, ...], prompt_len: int, lock: Any) -> None:
        self.tokenizer, self.stops, self.prompt_len, self.lock = tokenizer, stops, prompt_len, lock

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        with self.lock:
            texts = self.tokenizer.batch_decode(input_ids[:, self.prompt_len :], skip_special_tokens=True)
        return torch.tensor([any(s in t for s in self.stops) for t in texts], device=input_ids.device)


def cut_at_stop(text: str, stops: tuple[str, ...]) -> str:
    """The text up to (not including) its first stop string."""
    ends = [i for i in (text.find(s) for s in stops) if i >= 0]
    return text[: min(ends)] if ends else text


def _find_last(ids: list[int], pattern: list[int]) -> int | None:
    """Index of the last token of the last occurrence of `pattern` in `ids` (None when absent)."""
    n = len(pattern)
    if n == 0:
        return None
    for start in range(len(ids) - n, -1, -1):
        if ids[start : start + n] == pattern:
            return start + n - 1
    return None
