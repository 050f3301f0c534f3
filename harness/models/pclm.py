"""The prompt-conditioned layer mixer (PCLM) of VoxParadox (Pang, Chaubey & Soleymani 2026), attached to a
transformers audio LM with forward hooks, and saved/loaded beside a LoRA adapter.

Encoder layers L (the paper's {5, 15, 25, 30} of a 32-layer encoder, mapped proportionally onto the model's
depth) are tapped; each tapped layer's states go through the encoder's own final steps (Whisper-style towers:
the time average-pool and the layer norm) and through their own projector, initialised as a copy of the
pretrained final-layer projector. Weights alpha = softmax(MLP(e(prompt))) mix the projected layers and the
final layer's (pretrained projector, untouched); the mixture replaces the audio tokens the LM receives.

The prompt embedding e: the paper's is a small BERT over the prompt. `prompt_encoder` (a checkpoint directory
or a Hub id of any BERT-style transformers encoder) gives exactly that: the encoder reads each row's user prompt
text only (its text segments, recorded as the model's _encode sees the batch), mean-pooled. Without one
(LM_EMBEDDINGS, the default: nothing to fetch) e is the frozen LM's own input-token embeddings, mean-pooled over
the prompt's text tokens (audio placeholders, padding and, in training, the answer left out; the chat template's
tokens included), recorded as not the paper's protocol.

Families: those whose FamilySpec names an `audio_stack` -- Qwen2-Audio and Audio Flamingo 3 (a Whisper-style
encoder, then a separate `multi_modal_projector`). Not the others: Qwen2.5-Omni's projector (`proj`) sits
inside its audio tower after chunked, packed windows; Voxtral reshapes 4 frames into one before projecting and
cannot be trained here at all (chat-style prompts); Granite Speech feeds a windowed Q-Former from a CTC
encoder with a mid-layer feedback branch; Phi-4's conformer and Gemma 3n's audio embedder have no single
encoder-output -> projector seam. Each would need its own tap layout, so they are refused by name.

Nothing here imports finetune/: training (finetune.pclm) and `harness eval --adapter DIR` share this code.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .families import AudioStack
from .protocol import ModelError

log = logging.getLogger(__name__)

PCLM_CONFIG = "pclm_config.json"
PCLM_WEIGHTS = "pclm.safetensors"
LM_WEIGHTS = "lm_weights.safetensors"  # --full-finetune: the LM's fine-tuned weights
PROTOCOL_FILE = "protocol.json"  # {"not_paper_protocol": [...]}: how the adapter's training departs from the paper
# VoxParadox taps AF3's 32-layer AF-Whisper encoder at layers 5, 15, 25, 30 (plus the final layer).
PAPER_TAPS = (5, 15, 25, 30)
PAPER_DEPTH = 32
LM_EMBEDDINGS = "lm-embeddings"


def paper_taps(n_layers: int, paper: Sequence[int] = PAPER_TAPS, depth: int = PAPER_DEPTH) -> tuple[int, ...]:
    """The paper's tapped layers mapped proportionally onto an encoder of n_layers (1-based layer outputs,
    the final layer excluded since it is always mixed in): round(l * n / 32), at least 1, duplicates merged."""
    mapped = {max(1, round(layer * n_layers / depth)) for layer in paper}
    return tuple(sorted(t for t in mapped if t < n_layers))


@dataclass(frozen=True)
class PCLMConfig:
    """What a saved mixer is: the tapped layers, the encoder depth, the MLP and the prompt encoder."""

    taps: tuple[int, ...]  # 1-based encoder layers tapped besides the final one
    n_layers: int  # encoder depth (the final layer is layer n_layers)
    prompt_dim: int  # width of the prompt embedding the MLP reads
    hidden: int = 256  # the MLP's hidden width
    prompt_encoder: str = LM_EMBEDDINGS  # or a local sentence-encoder checkpoint directory
    version: int = 1

    def __post_init__(self) -> None:
        bad = [t for t in self.taps if not 1 <= t < self.n_layers]
        if bad or not self.taps:
            raise ValueError(f"PCLM taps must be encoder layers 1..{self.n_layers - 1} (the final layer "
                             f"{self.n_layers} is always mixed in); got {list(self.taps)}")

    @property
    def n_mixed(self) -> int:
        """How many projected layers alpha weighs (the taps and the final layer)."""
        return len(self.taps) + 1

    @classmethod
    def read(cls, folder: str | Path) -> PCLMConfig:
        """The config saved in `folder` (ValueError naming the file when it is not one)."""
        path = Path(folder) / PCLM_CONFIG
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return cls(**{**raw, "taps": tuple(raw["taps"])})
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise ValueError(f"{path}: not a PCLM config ({err})") from None


class SentenceEncoder:
    """A frozen BERT-style transformers encoder (a checkpoint directory or a Hub id), mean-pooled over the user's
    prompt text: the paper's prompt encoder."""

    def __init__(self, path: str, device: torch.device) -> None:
        from transformers import AutoModel, AutoTokenizer

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModel.from_pretrained(path).to(device).eval().requires_grad_(False)
        except (OSError, ValueError) as err:  # not a checkpoint, or a Hub id that cannot be fetched (offline)
            raise ValueError(f"prompt encoder {path!r}: cannot load it ({str(err).splitlines()[0]})") from None
        self.dim = int(self.model.config.hidden_size)

    @torch.no_grad()
    def __call__(self, texts: list[str]) -> torch.Tensor:
        enc = self.tokenizer(texts, padding=True, truncation=True, return_tensors="pt").to(self.model.device)
        states = self.model(**enc).last_hidden_state
        mask = enc["attention_mask"][..., None].to(states.dtype)
        return (states * mask).sum(1) / mask.sum(1).clamp(min=1)


class LayerMixer(nn.Module):
    """The trainable part: one projector per tapped layer (copies of the final one) and the alpha MLP."""

    def __init__(self, config: PCLMConfig, final_projector: nn.Module) -> None:
        super().__init__()
        self.config = config
        self.projectors = nn.ModuleList(copy.deepcopy(final_projector) for _ in config.taps)
        self.mlp = nn.Sequential(nn.Linear(config.prompt_dim, config.hidden), nn.GELU(),
                                 nn.Linear(config.hidden, config.n_mixed))
        self.enabled = True
        self.fixed_alpha: torch.Tensor | None = None  # (n_mixed,) used instead of the MLP (tests, ablations)

    def alpha(self, prompt: torch.Tensor) -> torch.Tensor:
        """(B, n_mixed) mixing weights for (B, prompt_dim) prompt embeddings; the last column is the final layer."""
        if self.fixed_alpha is not None:
            return self.fixed_alpha.to(prompt.device, torch.float32).expand(prompt.shape[0], -1)
        weight = self.mlp[0].weight
        return torch.softmax(self.mlp(prompt.to(weight.dtype)).float(), dim=-1)


@dataclass
class _Site:
    """The modules PCLM hooks into and what one forward leaves for the next hook to read."""

    model: nn.Module
    encoder: nn.Module
    stack: AudioStack
    mixer: LayerMixer
    audio_token_id: int
    feature_mask_key: str
    tokenizer: Any
    sentence: SentenceEncoder | None
    tapped: dict[int, torch.Tensor]
    window_alpha: torch.Tensor | None = None
    answer_tokens: torch.Tensor | None = None  # (B,) trailing answer tokens left out of the prompt (training)
    user_texts: list[str] | None = None  # the user prompts' text of the batch last encoded (the sentence encoder's)


def window_rows(row_tokens: Sequence[int], window_tokens: Sequence[int]) -> list[int]:
    """Which prompt row each encoder window belongs to: windows fill the rows' audio slots in order."""
    rows, r = [], 0
    left = row_tokens[0] if row_tokens else 0
    for w in window_tokens:
        while left <= 0 and r + 1 < len(row_tokens):
            r += 1
            left = row_tokens[r]
        if left < w:
            raise ModelError(f"PCLM: {w} audio tokens of a window do not fit the {left} audio slots left in row {r}")
        rows.append(r)
        left -= w
    return rows


def _prompt_mask(site: _Site, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T) the prompt's text tokens: attended, not audio slots, not the trailing answer (training)."""
    keep = mask.bool() & (ids != site.audio_token_id)
    if site.answer_tokens is not None:
        # Left padding: every row ends with its answer, so the last n tokens of row b are its answer.
        pos = torch.arange(ids.shape[1], device=ids.device)[None, :]
        keep &= pos < (ids.shape[1] - site.answer_tokens.to(ids.device)[:, None])
    return keep


def user_text(prompt: Any) -> str:
    """The user's prompt text: its text segments (no audio, no chat template, no answer)."""
    return " ".join(s.strip() for s in prompt.segments if isinstance(s, str) and s.strip())


def prompt_embedding(site: _Site, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, prompt_dim): the sentence encoder over each row's user prompt text (the paper's), or the frozen LM's
    token embeddings mean-pooled over the prompt's text tokens (the template's included)."""
    with torch.no_grad():
        if site.sentence is not None:
            texts = site.user_texts
            if texts is None or len(texts) != ids.shape[0]:
                raise ModelError(f"PCLM: the prompt encoder needs the user prompts of this batch of {ids.shape[0]} "
                                 "(the model was called without the wrapper's _encode)")
            return site.sentence(texts).float()
        keep = _prompt_mask(site, ids, mask)
        embeds = site.model.get_input_embeddings()(ids).float()
        w = keep[..., None].float()
        return (embeds * w).sum(1) / w.sum(1).clamp(min=1.0)


def _window_alpha(site: _Site, kwargs: dict[str, Any]) -> torch.Tensor:
    """(W, n_mixed): each encoder window's weights, from the prompt of the row its audio fills."""
    ids = kwargs["input_ids"]
    mask = kwargs.get("attention_mask")
    if mask is None:  # generate() leaves out the all-ones mask of an unpadded batch (one prompt, equal lengths)
        mask = torch.ones_like(ids)
    alpha = site.mixer.alpha(prompt_embedding(site, ids, mask))
    row_tokens = (ids == site.audio_token_id).sum(-1).tolist()
    fmask = kwargs.get(site.feature_mask_key)
    if fmask is None:  # one window per prompt that has audio
        rows = [r for r, n in enumerate(row_tokens) if n > 0]
    else:
        counts = site.encoder._get_feat_extract_output_lengths(fmask.sum(-1))[1].tolist()
        rows = window_rows(row_tokens, counts)
    return alpha[torch.as_tensor(rows, device=alpha.device, dtype=torch.long)]


def _apply_post(site: _Site, states: torch.Tensor) -> torch.Tensor:
    """The encoder's own final steps (pooling over time, then norm) on one tapped layer's (W, T, d) states."""
    for name, axis in site.stack.post:
        module = site.encoder.get_submodule(name)
        states = module(states.transpose(1, 2)).transpose(1, 2) if axis == "time" else module(states)
    return states


def _mix(site: _Site, final: torch.Tensor) -> torch.Tensor:
    """sum_l alpha_l P_l(post(H_l)) over the taps and the final layer's projected tokens (W, T', D)."""
    layers = [proj(_apply_post(site, site.tapped[t]))
              for t, proj in zip(site.mixer.config.taps, site.mixer.projectors, strict=True)]
    stacked = torch.stack([*layers, final])  # (n_mixed, W, T', D)
    alpha = site.window_alpha
    if alpha is None or alpha.shape[0] != final.shape[0]:
        raise ModelError(f"PCLM: {final.shape[0]} audio windows but weights for "
                         f"{None if alpha is None else alpha.shape[0]} (was the model called without input_ids?)")
    return torch.einsum("lwtd,wl->wtd", stacked, alpha.to(stacked.dtype))


def _install_hooks(site: _Site) -> list[Any]:
    """The three hooks: prompt -> alpha before the forward, tapped layer outputs, the projector's output mixed."""

    def before(_module: nn.Module, _args: tuple, kwargs: dict[str, Any]) -> None:
        site.tapped.clear()
        site.window_alpha = None
        ids = kwargs.get("input_ids")
        if site.mixer.enabled and ids is not None and kwargs.get("input_features") is not None:
            site.window_alpha = _window_alpha(site, kwargs)

    def tap(layer: int) -> Any:
        def hook(_module: nn.Module, _args: tuple, out: Any) -> None:
            if site.mixer.enabled:
                site.tapped[layer] = out[0] if isinstance(out, tuple) else out
        return hook

    def after_projector(_module: nn.Module, _args: tuple, out: torch.Tensor) -> torch.Tensor | None:
        if not site.mixer.enabled:
            return None
        return _mix(site, out)

    layers = site.encoder.get_submodule(site.stack.layers)
    handles = [site.model.register_forward_pre_hook(before, with_kwargs=True)]
    handles += [layers[t - 1].register_forward_hook(tap(t)) for t in site.mixer.config.taps]
    handles.append(site.model.get_submodule(site.stack.projector).register_forward_hook(after_projector))
    return handles


def _stack_of(lm: Any) -> AudioStack:
    stack = getattr(lm, "audio_stack", None)
    if stack is None:
        raise ValueError(f"{getattr(lm, 'name', lm)}: PCLM needs a multi-layer audio encoder feeding a separate "
                         f"projector (families qwen2-audio, audio-flamingo-3); family "
                         f"{getattr(lm, 'family', '?')!r} has none (see harness.models.pclm)")
    return stack


def encoder_depth(lm: Any) -> int:
    """How many transformer layers the model's audio encoder has."""
    stack = _stack_of(lm)
    return len(lm.model.get_submodule(stack.encoder).get_submodule(stack.layers))


def new_config(lm: Any, *, taps: Sequence[int] | None = None, hidden: int = 256,
               prompt_encoder: str | None = None) -> PCLMConfig:
    """A mixer config for `lm`: the paper's taps mapped onto its encoder unless `taps` is given."""
    depth = encoder_depth(lm)
    encoder = prompt_encoder or LM_EMBEDDINGS
    if encoder == LM_EMBEDDINGS:
        dim = int(lm.model.get_input_embeddings().weight.shape[1])
    else:
        from transformers import AutoConfig

        try:
            dim = int(AutoConfig.from_pretrained(encoder).hidden_size)
        except (OSError, ValueError) as err:  # not a checkpoint (no config.json, no model_type), or offline
            raise ValueError(f"prompt encoder {encoder!r}: cannot load it ({str(err).splitlines()[0]})") from None
    return PCLMConfig(taps=tuple(taps) if taps else paper_taps(depth), n_layers=depth, prompt_dim=dim,
                      hidden=hidden, prompt_encoder=encoder)


def attach(lm: Any, config: PCLMConfig) -> LayerMixer:
    """Build the mixer for `config`, register it as `lm.model.pclm` and hook it in; returns the mixer.

    The stock forward is used from now on (the fast encoder path calls the projector without the prompt)."""
    stack = _stack_of(lm)
    model = lm.model
    if hasattr(model, "pclm"):
        raise ValueError(f"{lm.name}: a PCLM is already attached")
    encoder = model.get_submodule(stack.encoder)
    if len(encoder.get_submodule(stack.layers)) != config.n_layers:
        raise ValueError(f"PCLM was built for a {config.n_layers}-layer encoder; {lm.name}'s has "
                         f"{len(encoder.get_submodule(stack.layers))}")
    final = model.get_submodule(stack.projector)
    param = next(final.parameters())
    mixer = LayerMixer(config, final).to(device=param.device, dtype=param.dtype)
    mixer.requires_grad_(False)
    model.add_module("pclm", mixer)
    sentence = None if config.prompt_encoder == LM_EMBEDDINGS else SentenceEncoder(config.prompt_encoder, param.device)
    site = _Site(model=model, encoder=encoder, stack=stack, mixer=mixer, audio_token_id=int(lm.audio_token_id),
                 feature_mask_key=lm.spec.feature_mask_key, tokenizer=lm.tokenizer, sentence=sentence, tapped={})
    mixer._site = site  # type: ignore[attr-defined]  # plain attribute: not a submodule, not in state_dict
    mixer._handles = _install_hooks(site)  # type: ignore[attr-defined]
    if sentence is not None:
        _record_user_texts(lm, site)
    # Both fast paths call the projector without the prompt: choices (lm.fast) and generate (lm.fast_generate,
    # which reads lm.fast and would call None) go back to the stock forward.
    lm.fast = None
    if hasattr(lm, "fast_generate"):
        lm.fast_generate = False
    return mixer


def _record_user_texts(lm: Any, site: _Site) -> None:
    """Wrap the model's _encode (every prompt batch goes through it before the forward) so that the sentence
    encoder reads each row's user prompt text, which the token ids alone no longer separate from the template."""
    encode = lm._encode

    def encode_and_record(prompts: list[Any], *args: Any, **kwargs: Any) -> Any:
        site.user_texts = [user_text(p) for p in prompts]
        return encode(prompts, *args, **kwargs)

    lm._encode = encode_and_record


def mixer_of(model: nn.Module) -> LayerMixer | None:
    """The PCLM attached to `model` (also through a PEFT or DDP wrapper), if any."""
    return next((m for m in model.modules() if isinstance(m, LayerMixer)), None)


def added_parameters(mixer: LayerMixer) -> int:
    """Parameters PCLM adds (the tapped layers' projectors and the alpha MLP)."""
    return sum(p.numel() for p in mixer.parameters())


@contextmanager
def prompt_without_answer(model: nn.Module, labels: torch.Tensor) -> Iterator[None]:
    """Leave each row's answer tokens (labels != -100) out of alpha's prompt: training rows end with them."""
    mixer = mixer_of(model)
    if mixer is None:
        yield
        return
    site = mixer._site  # type: ignore[attr-defined]
    site.answer_tokens = (labels != -100).sum(-1)
    try:
        yield
    finally:
        site.answer_tokens = None


@contextmanager
def pclm_disabled(model: nn.Module) -> Iterator[None]:
    """The model without its PCLM (the final layer's tokens as before), switched back on after."""
    mixer = mixer_of(model)
    if mixer is not None:
        mixer.enabled = False
    try:
        yield
    finally:
        if mixer is not None:
            mixer.enabled = True


def save(mixer: LayerMixer, folder: str | Path) -> None:
    """pclm.safetensors + pclm_config.json into `folder` (an adapter directory being assembled)."""
    from safetensors.torch import save_file

    from vocalgrad_dataset.fileio import atomic_write_text

    folder = Path(folder)
    weights = {k: v.detach().contiguous().cpu() for k, v in mixer.state_dict().items()}
    save_file(weights, str(folder / PCLM_WEIGHTS), metadata={"format": "pt"})
    atomic_write_text(folder / PCLM_CONFIG, json.dumps(asdict(mixer.config), indent=2) + "\n")


def saved_folder(adapter: str) -> Path | None:
    """Where an adapter's PCLM files are: the local adapter directory, or (a Hub adapter repo) the download
    of its pclm files; None when a Hub repo holds no PCLM."""
    local = Path(adapter).expanduser()
    if local.is_dir():
        return local
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    try:
        config = hf_hub_download(adapter, PCLM_CONFIG)
    except LocalEntryNotFoundError:  # offline, and no PCLM in the cache: say so rather than stay silent
        log.warning("%s: offline, cannot check the Hub repo for a PCLM (%s); the LoRA alone is attached",
                    adapter, PCLM_CONFIG)
        return None
    except EntryNotFoundError:  # a plain LoRA repo
        return None
    hf_hub_download(adapter, PCLM_WEIGHTS)
    with contextlib.suppress(EntryNotFoundError):  # absent when stage 2 trained LoRA, not the whole LM
        hf_hub_download(adapter, LM_WEIGHTS)
    with contextlib.suppress(EntryNotFoundError):  # absent for a run of the paper's protocol
        hf_hub_download(adapter, PROTOCOL_FILE)
    return Path(config).parent


def attach_saved(lm: Any, folder: str | Path) -> LayerMixer | None:
    """Attach the PCLM saved in an adapter directory (None when the directory holds none)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    if not (folder / PCLM_CONFIG).is_file():
        if (folder / LM_WEIGHTS).is_file():  # a fully fine-tuned LLM without a mixer (--method lora --full-finetune)
            load_lm_weights(lm.model, folder / LM_WEIGHTS)
        return None
    mixer = attach(lm, PCLMConfig.read(folder))
    try:
        mixer.load_state_dict(load_file(str(folder / PCLM_WEIGHTS)))
    except (OSError, RuntimeError, SafetensorError) as err:  # missing, truncated, or another mixer's tensors
        raise ValueError(f"{folder / PCLM_WEIGHTS}: cannot load the PCLM weights ({err})") from None
    if (folder / LM_WEIGHTS).is_file():
        load_lm_weights(lm.model, folder / LM_WEIGHTS)
    return mixer


def protocol_deviations(folder: str | Path) -> list[str]:
    """What an adapter's training did that the paper does not (its protocol.json), [] when it says nothing."""
    path = Path(folder) / PROTOCOL_FILE
    if not path.is_file():
        return []
    try:
        return [str(x) for x in json.loads(path.read_text(encoding="utf-8")).get("not_paper_protocol") or []]
    except (ValueError, AttributeError) as err:
        raise ValueError(f"{path}: not a protocol record ({err})") from None


def load_lm_weights(model: nn.Module, path: Path) -> None:
    """The fully fine-tuned LM weights saved beside the mixer, by their names in the (LoRA-wrapped) model."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        weights = load_file(str(path))
    except (OSError, SafetensorError) as err:
        raise ValueError(f"{path}: cannot load the fine-tuned LM weights ({err})") from None
    unexpected = model.load_state_dict(weights, strict=False).unexpected_keys
    if unexpected:
        raise ValueError(f"{path}: {len(unexpected)} tensors this model does not have, e.g. {unexpected[:3]}")
