"""Small, trainable fakes of the Kimi-Audio, MiMo-Audio and Step-Audio 2 runtimes.

Each fake has its runtime's entry points (module, class, constructor and the methods the wrappers and the
paper's fine-tuning scripts call) and a torch model with the real one's submodule names (Kimi-Audio's
`model.vq_adaptor`, `model.layers`, `model.mimo_layers`, `lm_head`, `mimo_output`; Step-Audio 2's `encoder`,
`adapter`, `model`, `lm_head`; MiMo-Audio's `model`, `speech_embeddings`, `local_transformer`, `lm_head`, ...),
a few thousand parameters in all, deterministic from a fixed seed. Its tokenizers map words to ids by CRC-32,
so a test can compute any token id itself.

`install(folder)` writes import shims (`kimia_infer/api/kimia.py`, `stepaudio2.py`, `src/mimo_audio/...`) that
re-export these classes, so a subprocess with `folder` on PYTHONPATH finds the fakes under the real names.
"""

from __future__ import annotations

import re
import sys
import types
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import torch
from torch import nn

DIM = 16
SEED = 7


def _wav(path: str, rate: int) -> np.ndarray:
    """The clip the runtime would load: mono float32, naively resampled to `rate` (what matters is the level)."""
    data, sr = sf.read(path, dtype="float32", always_2d=True)
    x = data[:, 0]
    n = max(1, int(round(len(x) * rate / sr)))
    return np.interp(np.linspace(0, len(x) - 1, n), np.arange(len(x)), x).astype(np.float32)


def frame_levels(x: np.ndarray, frames: int) -> np.ndarray:
    """RMS of `frames` equal parts of a clip: the fakes' audio features."""
    parts = np.array_split(x, frames)
    return np.array([float(np.sqrt(np.mean(p**2))) if len(p) else 0.0 for p in parts], dtype=np.float32)


class WordTokenizer:
    """Words (with their leading space) and listed special tokens to ids: specials first, words by CRC-32."""

    def __init__(self, vocab: int, specials: list[str]) -> None:
        self.vocab, self.specials = vocab, {s: i for i, s in enumerate(specials)}
        self.words: dict[int, str] = {i: s for s, i in self.specials.items()}
        pattern = "|".join(map(re.escape, sorted(specials, key=len, reverse=True)))
        self.split = re.compile(rf"({pattern})" if specials else r"(?!)")

    def word_id(self, word: str) -> int:
        i = len(self.specials) + zlib.crc32(word.encode()) % (self.vocab - len(self.specials))
        self.words.setdefault(i, word)
        return i

    def encode(self, text: str, bos: bool = False, eos: bool = False, **_: Any) -> list[int]:
        ids: list[int] = []
        for part in self.split.split(text):
            if part in self.specials:
                ids.append(self.specials[part])
            else:
                # a newline is a token of its own (as in Qwen's pre-tokenizer); other spaces lead the next word
                ids += [self.word_id(w) for w in re.findall(r"\n|[^\S\n]*\S+|[^\S\n]+$", part)]
        return ids

    def decode(self, ids: list[int], **_: Any) -> str:
        return "".join(self.words.get(int(i), f"<{int(i)}>") for i in ids)


class Block(nn.Module):
    """A residual MLP block with the names of a transformer layer's projections."""

    def __init__(self) -> None:
        super().__init__()
        self.self_attn = nn.Module()
        self.self_attn.q_proj, self.self_attn.o_proj = nn.Linear(DIM, DIM), nn.Linear(DIM, DIM)
        self.mlp = nn.Module()
        self.mlp.up_proj, self.mlp.down_proj = nn.Linear(DIM, 2 * DIM), nn.Linear(2 * DIM, DIM)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.self_attn.o_proj(torch.tanh(self.self_attn.q_proj(h)))
        return h + self.mlp.down_proj(torch.tanh(self.mlp.up_proj(h)))


def causal_mean(h: torch.Tensor) -> torch.Tensor:
    """Each position sees the mean of itself and everything before it (the fakes' causal attention)."""
    return h.cumsum(1) / torch.arange(1, h.shape[1] + 1, device=h.device, dtype=h.dtype).view(1, -1, 1)


class FakeCausalLM(nn.Module):
    """What PEFT's CAUSAL_LM task type and the loops read off a transformers causal LM."""

    supports_gradient_checkpointing = False

    def __init__(self) -> None:
        super().__init__()
        from transformers import PretrainedConfig

        self.config = PretrainedConfig(use_cache=True, tie_word_embeddings=False)

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, **kwargs: Any) -> dict[str, Any]:
        return {"input_ids": input_ids, **kwargs}


# ---- Kimi-Audio (kimia_infer.api.kimia) -------------------------------------------------------------------
KIMI_SPECIALS = ["<blank>", "<text_eos>", "<user_start>", "<assistant_start>", "<media_begin>", "<media_end>",
                 "<speech_ct>", "<msg_end>"]
KIMI_VOCAB, KIMI_AUDIO_VOCAB, KIMI_FEATURE = 256, 64, 4


class KimiAContent:
    """kimia_infer.utils.data.KimiAContent: parallel audio and text streams with their masks."""

    def __init__(self) -> None:
        self.audio_token_ids: list[int] = []
        self.text_token_ids: list[int] = []
        self.is_continuous_mask: list[bool] = []
        self.audio_token_loss_mask: list[bool] = []
        self.text_token_loss_mask: list[bool] = []
        self.continuous_feature: list[torch.Tensor] = []

    def add(self, audio: int, text: int, *, continuous: bool = False, text_loss: bool = False) -> None:
        self.audio_token_ids.append(audio)
        self.text_token_ids.append(text)
        self.is_continuous_mask.append(continuous)
        self.audio_token_loss_mask.append(False)
        self.text_token_loss_mask.append(text_loss)

    def to_tensor(self) -> tuple[torch.Tensor, ...]:
        def t(x: list, dtype: torch.dtype) -> torch.Tensor:
            return torch.tensor([x], dtype=dtype)

        return (t(self.audio_token_ids, torch.long), t(self.text_token_ids, torch.long),
                t(self.is_continuous_mask, torch.bool), t(self.audio_token_loss_mask, torch.bool),
                t(self.text_token_loss_mask, torch.bool))


class KimiPromptManager:
    """kimia_infer.api.prompt_manager.KimiAPromptManager.get_prompt, with the same stream layout."""

    def __init__(self) -> None:
        self.text_tokenizer = WordTokenizer(KIMI_VOCAB, KIMI_SPECIALS)
        self.sp = self.text_tokenizer.specials

    def _audio(self, out: KimiAContent, path: str) -> None:
        levels = frame_levels(_wav(path, 16000), 4)
        codes = [KIMI_AUDIO_VOCAB // 2 + min(int(v * 80), KIMI_AUDIO_VOCAB // 2 - 1) for v in levels]
        out.add(self.sp["<media_begin>"], self.sp["<blank>"])
        for c in codes:
            out.add(c, self.sp["<blank>"], continuous=True)
        out.add(self.sp["<media_end>"], self.sp["<blank>"])
        out.continuous_feature.append(torch.tensor(np.stack([levels] * KIMI_FEATURE, axis=-1))[None])

    def get_prompt(self, messages: list[dict], output_type: str = "text",
                   add_assistant_start_msg: bool = True) -> KimiAContent:
        assert output_type in ("text", "both")
        out, previous = KimiAContent(), None
        for i, m in enumerate(messages):
            role, loss = m["role"], m["role"] == "assistant"
            if role != previous:
                out.add(self.sp["<user_start>" if role == "user" else "<assistant_start>"], self.sp["<blank>"])
            if m["message_type"] == "text":
                for tok in self.text_tokenizer.encode(m["content"]):
                    out.add(self.sp["<blank>"], tok, text_loss=loss)
                if loss:
                    out.add(self.sp["<blank>"], self.sp["<text_eos>"], text_loss=True)
            else:
                self._audio(out, m["content"])
            last_of_turn = i == len(messages) - 1 or messages[i + 1]["role"] != role
            if last_of_turn and m["message_type"] == "audio":
                out.add(self.sp["<speech_ct>"], self.sp["<blank>"])
            if last_of_turn:
                out.add(self.sp["<msg_end>"], self.sp["<blank>"])
            previous = role
        if add_assistant_start_msg:
            out.add(self.sp["<assistant_start>"], self.sp["<blank>"])
        return out


class KimiModel(nn.Module):
    """MoonshotKimiaModel: token embeddings, the Whisper-feature adaptor, shared and MIMO layers."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(KIMI_VOCAB, DIM)
        self.vq_adaptor = nn.Module()
        self.vq_adaptor.layers = nn.Sequential(nn.Linear(KIMI_FEATURE, DIM), nn.Tanh(), nn.Linear(DIM, DIM))
        self.layers = nn.ModuleList([Block(), Block()])
        self.mimo_layers = nn.ModuleList([Block()])
        self.norm = nn.LayerNorm(DIM)


class KimiALM(FakeCausalLM):
    """MoonshotKimiaForCausalLM: forward returns (mimo_output(...), lm_head(...)) as its logits."""

    def __init__(self) -> None:
        super().__init__()
        self.model = KimiModel()
        self.lm_head = nn.Linear(DIM, KIMI_VOCAB, bias=False)
        self.mimo_output = nn.Linear(DIM, KIMI_AUDIO_VOCAB, bias=False)

    def forward(self, input_ids: torch.Tensor, text_input_ids: torch.Tensor | None = None,
                whisper_input_feature: list[torch.Tensor] | None = None,
                is_continuous_mask: torch.Tensor | None = None, position_ids: Any = None,
                past_key_values: Any = None, output_hidden_states: bool = False, return_dict: bool | None = None,
                use_cache: bool | None = None, **kwargs: Any) -> Any:
        m = self.model
        h = m.embed_tokens(input_ids) + m.embed_tokens(text_input_ids)
        if whisper_input_feature and is_continuous_mask is not None and bool(is_continuous_mask.any()):
            feats = torch.cat([f.reshape(-1, KIMI_FEATURE) for f in whisper_input_feature]).to(h.dtype)
            add = torch.zeros_like(h)
            add[is_continuous_mask] = m.vq_adaptor.layers(feats)
            h = h + add
        h = causal_mean(h)
        for layer in m.layers:
            h = layer(h)
        audio_h = h
        for layer in m.mimo_layers:
            audio_h = layer(audio_h)
        logits = (self.mimo_output(audio_h), self.lm_head(m.norm(h)))
        if return_dict is False:
            return (*logits, None)
        return types.SimpleNamespace(logits=logits, past_key_values=None)


class KimiAudio:
    """kimia_infer.api.kimia.KimiAudio: model_path, load_detokenizer; `alm`, `prompt_manager`, generate()."""

    def __init__(self, model_path: str, load_detokenizer: bool = True) -> None:
        torch.manual_seed(SEED)
        self.model_path = model_path
        self.alm = KimiALM().eval()
        self.prompt_manager = KimiPromptManager()

    @torch.no_grad()
    def generate(self, chats: list[dict], output_type: str = "text", audio_temperature: float = 0.0,
                 audio_top_k: int = 5, text_temperature: float = 0.0, text_top_k: int = 5,
                 audio_repetition_penalty: float = 1.0, audio_repetition_window_size: int = 64,
                 text_repetition_penalty: float = 1.0, text_repetition_window_size: int = 16,
                 max_new_tokens: int = -1) -> tuple[None, str]:
        history = self.prompt_manager.get_prompt(chats, output_type=output_type)
        audio, text, cont, _, _ = history.to_tensor()
        sp, out = self.prompt_manager.sp, []
        for _ in range(min(max_new_tokens if max_new_tokens > 0 else 8, 8)):
            _, logits, _ = self.alm(input_ids=audio, text_input_ids=text, whisper_input_feature=history.continuous_feature,
                                    is_continuous_mask=cont, return_dict=False)
            nxt = int(logits[0, -1].argmax())
            if nxt == sp["<text_eos>"]:
                break
            out.append(nxt)
            audio = torch.cat([audio, torch.tensor([[sp["<blank>"]]])], 1)
            text = torch.cat([text, torch.tensor([[nxt]])], 1)
            cont = torch.cat([cont, torch.tensor([[False]])], 1)
        return None, self.prompt_manager.text_tokenizer.decode(out)


# ---- Step-Audio 2 mini (stepaudio2) ---------------------------------------------------------------------
STEP_SPECIALS = ["<|endoftext|>", "<|BOT|>", "<|EOT|>", "<audio_start>", "<audio_patch>", "<audio_end>"]
STEP_VOCAB, STEP_MELS = 300, 8


class StepTokenizer(WordTokenizer):
    """The Hugging Face tokenizer's call: tokenizer(text=..., return_tensors="pt") -> {"input_ids": (1, n)}."""

    def __init__(self) -> None:
        super().__init__(STEP_VOCAB, STEP_SPECIALS)
        self.pad_token_id, self.eos_token_id = 0, self.specials["<|EOT|>"]

    def __call__(self, text: str, return_tensors: str = "pt", padding: bool = True, **_: Any) -> dict:
        return {"input_ids": torch.tensor([self.encode(text)], dtype=torch.long)}


def padding_mels(data: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """utils.padding_mels: (B, n_mels, frames) zero-padded, and the frame counts."""
    lens = torch.tensor([d.shape[-1] for d in data], dtype=torch.int32)
    out = torch.zeros(len(data), data[0].shape[0], int(lens.max()))
    for i, d in enumerate(data):
        out[i, :, : d.shape[-1]] = d
    return out, lens


class StepLLM(FakeCausalLM):
    """StepAudio2ForCausalLM: `encoder` + `adapter` for audio, `model` (decoder) and `lm_head`."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Module()
        self.encoder.blocks = nn.ModuleList([nn.Linear(STEP_MELS, DIM)])
        self.adapter = nn.Module()
        self.adapter.linear1, self.adapter.linear2 = nn.Linear(DIM, DIM), nn.Linear(DIM, DIM)
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(STEP_VOCAB, DIM)
        self.model.layers = nn.ModuleList([Block()])
        self.model.norm = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, STEP_VOCAB, bias=False)
        self.patch_id = STEP_SPECIALS.index("<audio_patch>")

    def forward(self, input_ids: torch.Tensor, wavs: torch.Tensor | None = None, wav_lens: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, use_cache: bool | None = None, **kwargs: Any) -> Any:
        h = self.model.embed_tokens(input_ids)
        if wavs is not None:
            audio = self.adapter.linear2(torch.tanh(self.adapter.linear1(self.encoder.blocks[0](wavs.transpose(1, 2)))))
            patches = input_ids == self.patch_id
            add = torch.zeros_like(h)
            for b in range(h.shape[0]):
                n = int(patches[b].sum())
                add[b, patches[b]] = audio[b, :n].to(h.dtype)
            h = h + add
        h = causal_mean(h)
        for layer in self.model.layers:
            h = layer(h)
        return types.SimpleNamespace(logits=self.lm_head(self.model.norm(h)))


class StepAudio2:
    """stepaudio2.StepAudio2: `llm`, `llm_tokenizer`, apply_chat_template(messages) -> (chunks, mels), __call__."""

    def __init__(self, model_path: str) -> None:
        torch.manual_seed(SEED)
        self.model_path = model_path
        self.llm_tokenizer = StepTokenizer()
        self.llm = StepLLM().eval()
        self.eos_token_id = self.llm_tokenizer.eos_token_id

    def apply_chat_template(self, messages: list[dict]) -> tuple[list[str], list[torch.Tensor]]:
        chunks: list[str] = []
        mels: list[torch.Tensor] = []
        for msg in messages:
            role, content = ("human" if msg["role"] in ("human", "user") else msg["role"]), msg["content"]
            if role == "assistant" and content is None:
                chunks.append("<|BOT|>assistant\n")
                continue
            if isinstance(content, str):
                chunks.append(f"<|BOT|>{role}\n{content}<|EOT|>")
                continue
            chunks.append(f"<|BOT|>{role}\n")
            for item in content:
                if item["type"] == "text":
                    chunks.append(item["text"])
                else:
                    levels = frame_levels(_wav(item["audio"], 16000), 4)
                    mels.append(torch.tensor(np.stack([levels] * STEP_MELS)))
                    chunks.append("<audio_start>" + "<audio_patch>" * 4 + "<audio_end>")
            chunks.append("<|EOT|>")
        return chunks, mels

    @torch.no_grad()
    def __call__(self, messages: list[dict], **kwargs: Any) -> tuple[list[int], str, list[int]]:
        chunks, mels = self.apply_chat_template(messages)
        ids = torch.cat([self.llm_tokenizer(text=c)["input_ids"] for c in chunks], dim=-1)
        wavs, lens = padding_mels(mels) if mels else (None, None)
        out: list[int] = []
        for _ in range(min(int(kwargs.get("max_new_tokens", 8)), 8)):
            nxt = int(self.llm(input_ids=ids, wavs=wavs, wav_lens=lens).logits[0, -1].argmax())
            if nxt == self.eos_token_id:
                break
            out.append(nxt)
            ids = torch.cat([ids, torch.tensor([[nxt]])], 1)
        return out, self.llm_tokenizer.decode(out), []


# ---- MiMo-Audio (src.mimo_audio.mimo_audio) -------------------------------------------------------------
MIMO_SPECIALS = ["<|empty|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
                 "<|sosp|>", "<|eosp|>"]
MIMO_VOCAB, MIMO_CODES, GROUP, CHANNELS = 200, 32, 4, 2


class InputSegment:
    """src.mimo_audio.process_speechdata.InputSegment: a text or an audio part of the prompt."""

    def __init__(self, text: str = "", audio: Any = None, tokenized_text: Any = None, speech_zeroemb_idx: int = 0,
                 text_zeroemb_idx: int = 0, add_sosp_eosp: bool = True) -> None:
        self.text, self.audio = text, audio
        self.speech_zeroemb_idx, self.text_zeroemb_idx = speech_zeroemb_idx, text_zeroemb_idx


class MiMoStopper:
    def __init__(self, stop_tokens: list[int], group_size: int, audio_channels: int, max_length: Any = None,
                 min_length: Any = None) -> None:
        self.stop_tokens = stop_tokens


class MiMoMain(nn.Module):
    """The Qwen2 decoder inside MiMoAudioForCausalLM: inputs_embeds in, last_hidden_state out."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(MIMO_VOCAB, DIM)
        self.layers = nn.ModuleList([Block()])
        self.norm = nn.LayerNorm(DIM)

    def forward(self, inputs_embeds: torch.Tensor, attention_mask: Any = None, position_ids: Any = None,
                use_cache: bool = False, return_dict: bool = True, cache_position: Any = None, **_: Any) -> Any:
        h = causal_mean(inputs_embeds)
        for layer in self.layers:
            h = layer(h)
        return types.SimpleNamespace(last_hidden_state=self.norm(h))


class MiMoModel(FakeCausalLM):
    """MiMoAudioForCausalLM: the main decoder (`model`), speech embeddings, the local transformer and heads."""

    def __init__(self) -> None:
        super().__init__()
        self.model = MiMoMain()
        self.speech_embeddings = nn.ModuleList([nn.Embedding(MIMO_CODES + 1, DIM) for _ in range(CHANNELS)])
        self.speech_group_downcast = nn.Linear(GROUP * DIM, DIM)
        self.hidden_states_downcast = nn.Linear(DIM, DIM)
        self.local_transformer = nn.ModuleList([Block()])
        self.local_transformer_lm_heads = nn.ModuleList([nn.Linear(DIM, MIMO_CODES + 1) for _ in range(CHANNELS)])
        self.lm_head = nn.Linear(DIM, MIMO_VOCAB, bias=False)

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, attention_mask: Any = None,
                                      use_cache: bool = False, **kwargs: Any) -> dict[str, Any]:
        grouped = input_ids.view(input_ids.shape[0], -1, CHANNELS + 1).transpose(1, 2)  # (B, 1 + C, T)
        groups = grouped.shape[-1] // GROUP
        return {"input_ids": grouped, "attention_mask": attention_mask,
                "position_ids": torch.arange(groups).unsqueeze(0), "cache_position": None}

    def _prepare_input_embeds(self, grouped: torch.Tensor) -> torch.Tensor:
        b, _, t = grouped.shape
        text = self.model.embed_tokens(grouped[:, 0, ::GROUP])  # (B, G, D)
        speech = sum(self.speech_embeddings[c](grouped[:, 1 + c]) for c in range(CHANNELS))  # (B, T, D)
        return text + self.speech_group_downcast(speech.reshape(b, t // GROUP, GROUP * DIM))


class MimoAudio:
    """src.mimo_audio.mimo_audio.MimoAudio: `model`, `tokenizer`, group layout, the SFT prompt, forward()."""

    def __init__(self, model_path: str, mimo_audio_tokenizer_path: str, device: str | None = None) -> None:
        torch.manual_seed(SEED)
        self.paths = (model_path, mimo_audio_tokenizer_path)
        self.device = torch.device("cpu")
        self.text_tokenizer = WordTokenizer(MIMO_VOCAB, MIMO_SPECIALS)
        sp = self.text_tokenizer.specials
        self.tokenizer = types.SimpleNamespace(eos_token_id=sp["<|endoftext|>"], encode=self.text_tokenizer.encode,
                                               decode=self.text_tokenizer.decode)
        self.empty_token, self.im_end_idx = sp["<|empty|>"], sp["<|im_end|>"]
        self.speech_zeroemb_idx = MIMO_CODES
        self.group_size, self.audio_channels = GROUP, CHANNELS
        self.model = MiMoModel().eval()
        self.mimo_audio_tokenizer = nn.Linear(1, 1)  # the audio tokenizer: never trained
        sampler = types.SimpleNamespace(do_sample=True, temperature=0.6, top_p=1.0)
        self.task_sampler_configs = {"audio_understanding": {"global": sampler, "local": sampler}}

    def get_input_ids(self, segments: list[InputSegment]) -> torch.Tensor:
        cols: list[list[int]] = []
        for seg in segments:
            if seg.audio is not None:
                levels = frame_levels(_wav(seg.audio, 24000), 2 * GROUP)
                codes = [min(int(v * 40), MIMO_CODES - 1) for v in levels]
                for g in range(2):
                    for k in range(GROUP):
                        cols.append([self.empty_token] + [codes[g * GROUP + k]] * CHANNELS)
                continue
            cols += self.text_columns(self.text_tokenizer.encode(seg.text))
        return torch.tensor(cols, dtype=torch.long).T.contiguous()  # (1 + C, T)

    def text_columns(self, ids: list[int]) -> list[list[int]]:
        """One group per text token: the token, then empty text; no speech (its zero-embedding index)."""
        cols: list[list[int]] = []
        for tok in ids:
            cols.append([tok] + [self.speech_zeroemb_idx] * CHANNELS)
            cols += [[self.empty_token] + [self.speech_zeroemb_idx] * CHANNELS] * (GROUP - 1)
        return cols

    def get_audio_understanding_sft_prompt(self, input_speech: str, input_text: str,
                                           thinking: bool = False) -> torch.Tensor:
        parts = [InputSegment(text="<|im_start|>user\n"), InputSegment(audio=input_speech),
                 InputSegment(text=f"{input_text}<|im_end|>\n<|im_start|>assistant\n")]
        if not thinking:
            parts.append(InputSegment(text="<think>\n\n</think>\n"))
        return self.get_input_ids(parts)

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor, return_audio: bool = False, output_audio_path: Any = None,
                stopping_criteria: Any = None, min_new_tokens: int = 0, max_new_tokens: int = 8192,
                add_history: bool = False, task_name: Any = None) -> str:
        out: list[int] = []
        ids = input_ids
        for _ in range(min(max_new_tokens, 8)):
            grouped = ids.unsqueeze(0)
            h = self.model.model(inputs_embeds=self.model._prepare_input_embeds(grouped)).last_hidden_state
            nxt = int(self.model.lm_head(h)[0, -1].argmax())
            if nxt in (self.im_end_idx, self.tokenizer.eos_token_id):
                break
            out.append(nxt)
            ids = torch.cat([ids, torch.tensor(self.text_columns([nxt]), dtype=torch.long).T], 1)
        return self.text_tokenizer.decode(out)


# ---- installing the fakes under the runtimes' module names -------------------------------------------------
SHIMS = {
    "kimia_infer/api/kimia.py": "KimiAudio",
    "stepaudio2.py": "StepAudio2, padding_mels",
    "src/mimo_audio/mimo_audio.py": "MimoAudio, MiMoStopper",
    "src/mimo_audio/process_speechdata.py": "InputSegment",
}


def install(folder: Path) -> Path:
    """Write modules named as the runtimes' that re-export these fakes; returns `folder` (for sys.path)."""
    for rel, names in SHIMS.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(folder).parents:
            if str(parent) != ".":
                (folder / parent / "__init__.py").touch()
        path.write_text(f"from tests.helpers.fake_runtimes import {names}  # noqa: F401\n")
    return folder


RUNTIME_MODULES = ("kimia_infer", "stepaudio2", "src")


def forget_modules() -> None:
    """Drop the shims from sys.modules (another test may install other fakes under the same names)."""
    for name in list(sys.modules):
        if name.split(".")[0] in RUNTIME_MODULES:
            del sys.modules[name]
