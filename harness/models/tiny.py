"""Tiny, randomly initialised (seeded) models of all seven transformers families, for tests and benchmarks.

Each is the family's real model, processor and feature-extractor classes with a small config, a tokenizer
of the family's real algorithm trained locally with `tokenizers` (or mistral-common's Tekken for Voxtral)
on TRAINING_TEXT, and the family's real chat template text. `tiny_model` saves the built model + processor
with save_pretrained into a cache folder keyed by a hash of the recipe, then loads it through HFAudioLM's
normal from_pretrained path, so a tiny model exercises exactly the loading code a real checkpoint takes
(processor and tokenizer loading, chat-template discovery, adapters, optional-dependency stand-ins).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The tokenizers learn their merges from this text. It never contains the prompt's answer words, so there
# "increase"/"decrease" split into several tokens.
TRAINING_TEXT = (
    "The voice in the audio clip is loud at first and then quiet. Does the pitch rise or fall over time? "
    "Answer with only one word. The speaker talks about the weather, the river and the old house on the hill. "
    "Listen to the sound: is the noise in the background getting stronger or weaker? The echo of the room, "
    "the clarity of the voice, the roughness and the distortion of the recording all change. "
    "You are a helpful assistant. What do you hear in this recording? Speech, music, or silence? "
    "The speed of speaking is slow, then fast; the volume goes up and goes down. 0 1 2 3 4 5 6 7 8 9 10 100 "
)

# The Qwen vocabularies hold "increase"/"decrease" as whole tokens (frequent English words in a 151k vocab);
# the Qwen-family tiny tokenizers learn them from these lines too. The other families' tiny vocabularies never
# see them, so there they split into several tokens (multi-token answers are exercised on those).
QWEN_ANSWER_TEXT = "increase\ndecrease\n" * 8 + "It will increase or decrease. " * 4

# Pre-tokenizer regexes, copied from each family's tokenizer.json (Qwen2: Qwen2TokenizerFast's PRETOKENIZE_REGEX;
# o200k (Phi-4): tiktoken's o200k_base pattern; Tekken v7+ (Voxtral): mistral-common's tekken.json "pattern").
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
O200K_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
               r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
               r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")

# ---- chat templates: each family's real template text ------------------------------------------------------
# Qwen/Qwen2-Audio-7B-Instruct chat_template.json (also transformers' Qwen2AudioProcessor.default_chat_template).
QWEN2_AUDIO_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if 'audio' in content or 'audio_url' in content %}{% set audio_count.value = audio_count.value + 1 %}"
    "Audio {{ audio_count.value }}: <|audio_bos|><|AUDIO|><|audio_eos|>\n{% elif 'text' in content %}{{ content['text'] }}"
    "{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# nvidia/audio-flamingo-3-hf chat_template.jinja: one <sound> per turn, before the turn's text.
AF3_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "{% for m in messages if m['content'] is not none %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% set audio = namespace(found=False) %}{% set text_buf = namespace(v='') %}"
    "{% for c in m['content'] %}"
    "{% if c.get('type') == 'audio' or 'audio' in c %}{% set audio.found = True %}"
    "{% elif c.get('type') == 'text' or 'text' in c %}{% set text_buf.v = text_buf.v + c['text'] %}{% endif %}"
    "{% endfor %}{% if audio.found %}{{ '<sound>' }}{% endif %}{{ text_buf.v }}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Qwen/Qwen2.5-Omni-7B chat_template.json.
QWEN2_5_OMNI_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful "
    "assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or "
    "'image' in content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_bos|><|IMAGE|><|vision_eos|>{% elif content['type'] == 'audio' or "
    "'audio' in content or 'audio_url' in content %}{% set audio_count.value = audio_count.value + 1 %}{% if add_audio_id %}"
    "Audio {{ audio_count.value }}: {% endif %}<|audio_bos|><|AUDIO|><|audio_eos|>{% elif content['type'] == 'video' or "
    "'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: "
    "{% endif %}<|vision_bos|><|VIDEO|><|vision_eos|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}"
    "<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# ibm-granite/granite-speech-3.3-8b tokenizer_config.json (the Granite 3.3 instruct template; the model card
# renders prompts with tokenizer.apply_chat_template). Without a system turn it writes today's date.
GRANITE_3_3_TEMPLATE = (
    "{# Alias tools -> available_tools #}\n{%- if tools and not available_tools -%}\n    {%- set available_tools = tools -%}\n"
    "{%- endif -%}\n{%- if messages[0]['role'] == 'system' %}\n     {%- set system_message = messages[0]['content'] %}\n"
    "     {%- set loop_messages = messages[1:] %}\n {%- else %}\n     {%- set system_message = \"Knowledge Cutoff Date: "
    "April 2024.\nToday's Date: \" + strftime_now('%B %d, %Y') + \".\nYou are Granite, developed by IBM.\" %}\n"
    "     {%- if available_tools and documents %}\n         {%- set system_message = system_message + \" You are a helpful "
    "assistant with access to the following tools. When a tool is required to answer the user's query, respond only with "
    "<|tool_call|> followed by a JSON list of tools used. If a tool does not exist in the provided list of tools, notify "
    "the user that you do not have the ability to fulfill the request. \nWrite the response to the user's input by "
    "strictly aligning with the facts in the provided documents. If the information needed to answer the question is not "
    "available in the documents, inform the user that the question cannot be answered based on the available data.\" %}\n"
    "     {%- elif available_tools %}\n         {%- set system_message = system_message + \" You are a helpful assistant "
    "with access to the following tools. When a tool is required to answer the user's query, respond only with "
    "<|tool_call|> followed by a JSON list of tools used. If a tool does not exist in the provided list of tools, notify "
    "the user that you do not have the ability to fulfill the request.\" %}\n     {%- elif documents %}\n"
    "         {%- set system_message = system_message + \" Write the response to the user's input by strictly aligning "
    "with the facts in the provided documents. If the information needed to answer the question is not available in the "
    "documents, inform the user that the question cannot be answered based on the available data.\" %}\n"
    "    {%- elif thinking %}\n    {%- set system_message = system_message + \" You are a helpful AI assistant.\nRespond "
    "to every user query in a comprehensive and detailed way. You can write down your thoughts and reasoning process "
    "before responding. In the thought process, engage in a comprehensive cycle of analysis, summarization, exploration, "
    "reassessment, reflection, backtracing, and iteration to develop well-considered thinking process. In the response "
    "section, based on various attempts, explorations, and reflections from the thoughts section, systematically present "
    "the final solution that you deem correct. The response should summarize the thought process. Write your thoughts "
    "between <think></think> and write your response between <response></response> for each user query.\" %}\n"
    "     {%- else %}\n         {%- set system_message = system_message + \" You are a helpful AI assistant.\" %}\n"
    "     {%- endif %}\n     {%- if 'citations' in controls and documents %}\n         {%- set system_message = "
    "system_message + ' \nUse the symbols <|start_of_cite|> and <|end_of_cite|> to indicate when a fact comes from a "
    "document in the search result, e.g <|start_of_cite|> {document_id: 1}my fact <|end_of_cite|> for a fact from "
    "document 1. Afterwards, list all the citations with their corresponding documents in an ordered list.' %}\n"
    "     {%- endif %}\n     {%- if 'hallucinations' in controls and documents %}\n         {%- set system_message = "
    "system_message + ' \nFinally, after the response is written, include a numbered list of sentences from the "
    "response with a corresponding risk value that are hallucinated and not based in the documents.' %}\n"
    "     {%- endif %}\n     {%- set loop_messages = messages %}\n {%- endif %}\n {{- '<|start_of_role|>system"
    "<|end_of_role|>' + system_message + '<|end_of_text|>\n' }}\n {%- if available_tools %}\n     {{- '<|start_of_role|>"
    "available_tools<|end_of_role|>' }}\n     {{- available_tools | tojson(indent=4) }}\n     {{- '<|end_of_text|>\n' }}\n"
    " {%- endif %}\n {%- if documents %}\n     {%- for document in documents %}\n         {{- '<|start_of_role|>document "
    "{\"document_id\": \"' + document['doc_id'] | string + '\"}<|end_of_role|>\n' }}\n         {{- document['text'] }}\n"
    "         {{- '<|end_of_text|>\n' }}\n              {%- endfor %}\n {%- endif %}\n {%- for message in loop_messages %}\n"
    "     {{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}\n"
    "     {%- if loop.last and add_generation_prompt %}\n         {{- '<|start_of_role|>assistant' }}\n"
    "             {%- if controls %}\n                 {{- ' ' + controls | tojson()}}\n             {%- endif %}\n"
    "         {{- '<|end_of_role|>' }}\n     {%- endif %}\n {%- endfor %}"
)
# microsoft/Phi-4-multimodal-instruct tokenizer_config.json (the Phi-4-mini template; the transformers-native
# revision's processor copies it: convert_phi4_multimodal_weights_to_hf.py sets processor.chat_template =
# processor.tokenizer.chat_template). It joins message['content'] as a string.
PHI4_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and message['tools'] is not none %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}"
    "{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}"
)
# google/gemma-3n-E4B-it chat_template.jinja.
GEMMA3N_TEMPLATE = (
    "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n{%- else -%}\n    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n{%- endif -%}\n{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n    {%- if (message['role'] == 'assistant') -%}\n        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n        {%- set role = message['role'] -%}\n    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'audio' -%}\n                {{ '<audio_soft_token>' }}\n"
    "            {%- elif item['type'] == 'image' -%}\n                {{ '<image_soft_token>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n        {%- endfor -%}\n    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n    {%- endif -%}\n    {{ '<end_of_turn>\n' }}\n"
    "{%- endfor -%}\n{%- if add_generation_prompt -%}\n    {{'<start_of_turn>model\n'}}\n{%- endif -%}\n"
)

TEMPLATES = {"qwen2-audio": QWEN2_AUDIO_TEMPLATE, "audio-flamingo-3": AF3_CHAT_TEMPLATE,
             "qwen2.5-omni": QWEN2_5_OMNI_TEMPLATE, "granite-speech": GRANITE_3_3_TEMPLATE,
             "phi-4-multimodal": PHI4_TEMPLATE, "gemma-3n": GEMMA3N_TEMPLATE}
TINY_FAMILIES = ("qwen2-audio", "audio-flamingo-3", "qwen2.5-omni", "voxtral", "granite-speech",
                 "phi-4-multimodal", "gemma-3n")


# ---- tokenizers ------------------------------------------------------------------------------------------------
def _bpe_byte_level(regex: str | None, vocab_size: int, *, nfc: bool = False, digits: bool = False,
                    text: str = TRAINING_TEXT) -> Any:
    """A byte-level BPE (GPT-2 bytes-to-unicode alphabet) trained on `text` with the given pre-tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    if nfc:
        tok.normalizer = normalizers.NFC()
    if regex is None:  # GPT-2's own regex inside ByteLevel (Granite / StarCoder style), digits split first
        steps = [pre_tokenizers.Digits(individual_digits=True)] if digits else []
        tok.pre_tokenizer = pre_tokenizers.Sequence([*steps, pre_tokenizers.ByteLevel(add_prefix_space=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=[])
    tok.train_from_iterator([text], trainer)
    return tok


def _fast(tok: Any, specials: list[str], **kwargs: Any) -> Any:
    """PreTrainedTokenizerFast over `tok` with `specials` added as special tokens (ids after the vocab)."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=32768, **kwargs)


def build_tokenizer(audio_specials: tuple[str, ...]) -> Any:
    """A Qwen2-style byte-level BPE with ChatML specials plus `audio_specials` (benchmarks use this)."""
    qwen = _bpe_byte_level(QWEN2_REGEX, 600, nfc=True, text=TRAINING_TEXT + QWEN_ANSWER_TEXT)
    return _fast(qwen, ["<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                                                  *audio_specials],
                 eos_token="<|im_end|>", pad_token="<|endoftext|>")


def _sentencepiece_bpe(vocab_size: int, specials: list[str]) -> Any:
    """Gemma-style SentencePiece BPE: "▁" for spaces, byte fallback (<0x00>..<0xFF>) for unseen characters."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    base = Tokenizer(models.BPE())
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    base.train_from_iterator([TRAINING_TEXT], trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False))
    learned = json.loads(base.to_str())["model"]
    vocab = {t: i for i, t in enumerate(specials)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece in sorted(learned["vocab"], key=learned["vocab"].get):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in learned["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Metaspace(replacement="▁", prepend_scheme="never", split=True)])
    return tok


def _tekken_file(path: Path, n_merges: int = 400) -> None:
    """A Tekken (tiktoken-style BPE) tokenizer file for mistral-common: ranks 0..255 the bytes, then the merges
    learned on TRAINING_TEXT with the Tekken pre-tokenizer regex; Voxtral's special-token ranks and audio config."""
    from tokenizers import pre_tokenizers

    tok = _bpe_byte_level(TEKKEN_REGEX, 256 + n_merges)
    byte_of = {ch: b for b, ch in _bytes_to_unicode().items()}
    model = json.loads(tok.to_str())["model"]
    vocab = [bytes([b]) for b in range(256)]
    seen = set(vocab)
    for m in model["merges"]:
        left, right = (m if isinstance(m, list) else m.split(" "))
        piece = bytes(byte_of[c] for c in left + right)
        if piece not in seen:
            seen.add(piece)
            vocab.append(piece)
    del pre_tokenizers
    names = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
             "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
             "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]", "[ARGS]", "[CALL_ID]", "[THINK]",
             "[/THINK]", "[AUDIO]", "[BEGIN_AUDIO]", "[TRANSCRIBE]"]  # [AUDIO] = 24, as VoxtralProcessor assumes
    n_special = 32
    data = {
        "config": {"pattern": TEKKEN_REGEX, "num_vocab_tokens": len(vocab), "default_vocab_size": len(vocab) + n_special,
                   "default_num_special_tokens": n_special, "version": "v11"},
        "vocab": [{"rank": i, "token_bytes": base64.b64encode(p).decode(), "token_str": p.decode("utf-8", "replace")}
                  for i, p in enumerate(vocab)],
        "special_tokens": [{"rank": i, "token_str": t, "is_control": True} for i, t in enumerate(names)],
        # Voxtral-Mini-3B-2507 tekken.json "audio": 16 kHz, 12.5 tokens/s, Whisper mel (128 bins, hop 160, win 400),
        # padded to 30 s chunks.
        "audio": {"sampling_rate": 16000, "frame_rate": 12.5, "chunk_length_s": 30.0,
                  "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400}},
    }
    path.write_text(json.dumps(data), encoding="utf-8")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (what ByteLevel pre-tokenisation emits)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


# ---- model configs -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TinyBuild:
    """What a family's tiny builder returns: the model (random weights) and its processor, ready to save."""

    model: Any
    processor: Any
    extra_files: Callable[[Path], None] | None = None  # writes adapters etc. next to the saved model


def _text_config(cls_name: str, vocab: int, tok: Any, *, layers: int = 2, init_std: float = 0.1, **extra: Any) -> Any:
    import transformers as tf

    return getattr(tf, cls_name)(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                                 initializer_range=init_std, pad_token_id=tok.pad_token_id,
                                 eos_token_id=tok.eos_token_id, tie_word_embeddings=False, **extra)


# The Whisper-style encoders see 1500 positions (30 s) on the stock path, so they stay narrower than the decoder.
WHISPER_ENCODER = {"num_mel_bins": 128, "encoder_layers": 2, "encoder_attention_heads": 2, "encoder_ffn_dim": 64,
                   "d_model": 32, "max_source_positions": 1500}


def _random_model(cls: Any, config: Any, seed: int, eos: int | list[int], pad: int) -> Any:
    """`cls` with weights drawn from `seed` (sdpa attention, eval mode), generation stopping at `eos`, padding `pad`."""
    import torch

    torch.manual_seed(seed)
    model = cls._from_config(config, attn_implementation="sdpa").eval()
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    return model


def _qwen_family(family: str, seed: int, init_std: float, text_layers: int) -> TinyBuild:
    import transformers as tf

    audio_specials = {"qwen2-audio": ["<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"],
                      "audio-flamingo-3": ["<sound>"]}[family]
    tok = build_tokenizer(tuple(audio_specials))
    features = tf.WhisperFeatureExtractor(feature_size=128, return_attention_mask=True)
    text = _text_config("Qwen2Config", len(tok), tok, layers=text_layers, init_std=init_std)
    encoder = {**WHISPER_ENCODER, "initializer_range": init_std}
    if family == "qwen2-audio":
        processor = tf.Qwen2AudioProcessor(feature_extractor=features, tokenizer=tok, chat_template=QWEN2_AUDIO_TEMPLATE)
        config = tf.Qwen2AudioConfig(audio_config={"model_type": "qwen2_audio_encoder", **encoder}, text_config=text,
                                     audio_token_index=tok.convert_tokens_to_ids("<|AUDIO|>"))
        cls = tf.Qwen2AudioForConditionalGeneration
    else:
        processor = tf.AudioFlamingo3Processor(features, tok, chat_template=AF3_CHAT_TEMPLATE)
        config = tf.AudioFlamingo3Config(audio_config={"model_type": "audioflamingo3_encoder", **encoder},
                                         text_config=text, audio_token_id=tok.convert_tokens_to_ids("<sound>"))
        cls = tf.AudioFlamingo3ForConditionalGeneration
    # Both ChatML ends stop generation, as in the checkpoints' generation_config.json.
    model = _random_model(cls, config, seed, [tok.eos_token_id, tok.pad_token_id], tok.pad_token_id)
    return TinyBuild(model, processor)


def _omni(seed: int, init_std: float, text_layers: int) -> TinyBuild:
    import torch
    import transformers as tf

    from .frontends import importable, visual_standin, with_standins

    names = {"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>",
             "image_token": "<|IMAGE|>", "video_token": "<|VIDEO|>", "vision_bos_token": "<|vision_bos|>",
             "vision_eos_token": "<|vision_eos|>"}
    tok = _fast(_bpe_byte_level(QWEN2_REGEX, 600, nfc=True, text=TRAINING_TEXT + QWEN_ANSWER_TEXT),
                ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *names.values()],
                eos_token="<|im_end|>", pad_token="<|endoftext|>", extra_special_tokens=names)
    ids = {k: tok.convert_tokens_to_ids(v) for k, v in names.items()}
    vision_ok = importable("torchvision")
    image = tf.Qwen2VLImageProcessor() if vision_ok else visual_standin("image_processor")
    video = tf.Qwen2VLVideoProcessor() if vision_ok else visual_standin("video_processor")
    processor = with_standins(tf.Qwen2_5OmniProcessor)(image, video, tf.WhisperFeatureExtractor(feature_size=128, return_attention_mask=True),
                                        tok, chat_template=QWEN2_5_OMNI_TEMPLATE)
    text = _text_config("Qwen2_5OmniTextConfig", len(tok), tok, layers=text_layers, init_std=init_std,
                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]})
    audio = {"num_mel_bins": 128, "encoder_layers": 2, "encoder_attention_heads": 2, "encoder_ffn_dim": 64, "d_model": 32,
             "max_source_positions": 1500, "n_window": 100, "output_dim": 64, "initializer_range": init_std}
    vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64,
              "fullatt_block_indexes": [0], "initializer_range": init_std}
    thinker = tf.Qwen2_5OmniThinkerConfig(
        audio_config=audio, vision_config=vision, text_config=text, audio_token_index=ids["audio_token"],
        image_token_index=ids["image_token"], video_token_index=ids["video_token"],
        audio_start_token_id=ids["audio_bos_token"], audio_end_token_id=ids["audio_eos_token"],
        vision_start_token_id=ids["vision_bos_token"], vision_end_token_id=ids["vision_eos_token"],
        user_token_id=tok.convert_tokens_to_ids(tok.tokenize("user"))[0], initializer_range=init_std)
    config = tf.Qwen2_5OmniConfig(thinker_config=thinker.to_dict(), enable_audio_output=False)
    model = _random_model(tf.Qwen2_5OmniForConditionalGeneration, config, seed, [tok.eos_token_id, tok.pad_token_id],
                          tok.pad_token_id)

    def write_speakers(folder: Path) -> None:
        # from_pretrained always reads the talker's speaker table; the thinker-only tiny model has no speakers.
        torch.save({}, folder / "spk_dict.pt")

    return TinyBuild(model, processor, extra_files=write_speakers)


def _voxtral(seed: int, init_std: float, text_layers: int) -> TinyBuild:
    import transformers as tf

    # MistralCommonBackend reads its tekken.json from a folder and copies it when saved: keep one in the cache.
    folder = cache_root() / f".voxtral-tekken-{recipe_key('voxtral', 0, 0.0, 0)}"
    if not (folder / "tekken.json").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".tekken.{os.getpid()}.json"
        _tekken_file(tmp)
        os.replace(tmp, folder / "tekken.json")
    tok = tf.MistralCommonBackend.from_pretrained(str(folder))
    vocab = len(tok)
    processor = tf.VoxtralProcessor(tf.WhisperFeatureExtractor(feature_size=128, return_attention_mask=False), tok)
    text = tf.LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=text_layers,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
                          initializer_range=init_std, bos_token_id=1, eos_token_id=2, pad_token_id=11)
    audio = {"hidden_size": 32, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
             "num_mel_bins": 128, "max_source_positions": 1500, "initializer_range": init_std}
    config = tf.VoxtralConfig(audio_config=audio, text_config=text, audio_token_id=24)
    model = _random_model(tf.VoxtralForConditionalGeneration, config, seed, 2, 11)
    return TinyBuild(model, processor)


def _granite(seed: int, init_std: float, text_layers: int) -> TinyBuild:
    import torch
    import transformers as tf
    from peft import LoraConfig, get_peft_model

    from .frontends import granite_feature_extractor_class, importable

    tok = _fast(_bpe_byte_level(None, 600, digits=True),
                ["<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>", "<|tool_call|>", "<|audio|>"],
                bos_token="<|end_of_text|>", eos_token="<|end_of_text|>", pad_token="<|end_of_text|>",
                extra_special_tokens={"audio_token": "<|audio|>"})
    tok.chat_template = GRANITE_3_3_TEMPLATE  # the tokenizer's template, as the model card renders with
    fe_cls = tf.GraniteSpeechFeatureExtractor if importable("torchaudio") else granite_feature_extractor_class()
    features = fe_cls(projector_window_size=15, projector_downsample_rate=5)  # 80 mels, as published
    processor = tf.GraniteSpeechProcessor(features, tok)  # the published processor has no chat template
    text = _text_config("GraniteConfig", len(tok), tok, layers=text_layers, init_std=init_std,
                        embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0078125,
                        logits_scaling=8.0, bos_token_id=tok.bos_token_id)
    encoder = {"input_dim": 160, "num_layers": 2, "hidden_dim": 32, "feedforward_mult": 2, "num_heads": 2, "dim_head": 16,
               "output_dim": 8, "context_size": 200, "max_pos_emb": 512, "conv_kernel_size": 15}
    projector = {"model_type": "blip_2_qformer", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                 "intermediate_size": 64, "encoder_hidden_size": 32, "cross_attention_frequency": 1,
                 "initializer_range": init_std}
    config = tf.GraniteSpeechConfig(text_config=text, encoder_config=encoder, projector_config=projector,
                                    audio_token_index=tok.convert_tokens_to_ids("<|audio|>"), has_lora_adapter=True,
                                    window_size=15, downsample_rate=5, initializer_range=init_std)
    model = _random_model(tf.GraniteSpeechForConditionalGeneration, config, seed, tok.eos_token_id, tok.pad_token_id)

    def write_adapter(folder: Path) -> None:
        # The checkpoint's root LoRA (adapter_config.json beside config.json): random, non-zero, so it matters.
        torch.manual_seed(seed + 1)
        lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                init_lora_weights=False, task_type="CAUSAL_LM"))
        lora.save_pretrained(folder)
        lora.unload()
        # As published, the template lives in tokenizer_config.json and the processor has none.
        (folder / "chat_template.jinja").unlink(missing_ok=True)
        config_path = folder / "tokenizer_config.json"
        tok_config = json.loads(config_path.read_text(encoding="utf-8"))
        tok_config["chat_template"] = GRANITE_3_3_TEMPLATE
        config_path.write_text(json.dumps(tok_config, indent=2), encoding="utf-8")

    return TinyBuild(model, processor, extra_files=write_adapter)


def _phi4(seed: int, init_std: float, text_layers: int) -> TinyBuild:
    import torch
    import transformers as tf
    from peft import LoraConfig, get_peft_model

    from .frontends import importable, visual_standin, with_standins

    names = {"image_token": "<|image|>", "audio_token": "<|audio|>"}
    tok = _fast(_bpe_byte_level(O200K_REGEX, 600),
                ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", *names.values()],
                bos_token="<|endoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                extra_special_tokens=names)
    image = tf.Phi4MultimodalImageProcessor() if importable("torchvision") else visual_standin("image_processor")
    features = tf.Phi4MultimodalFeatureExtractor(feature_size=80)
    processor = with_standins(tf.Phi4MultimodalProcessor)(image, features, tok, chat_template=PHI4_TEMPLATE)
    audio = {"hidden_size": 32, "intermediate_size": 64, "num_blocks": 2, "num_attention_heads": 2, "input_size": 80,
             "ext_pw_out_channel": 32, "depthwise_separable_out_channel": 32, "nemo_conv_channels": 32,
             "time_reduction": 8, "audio_token_id": tok.convert_tokens_to_ids("<|audio|>"), "initializer_range": init_std}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "image_token_id": tok.convert_tokens_to_ids("<|image|>"), "initializer_range": init_std}
    end = tok.convert_tokens_to_ids("<|end|>")
    config = tf.Phi4MultimodalConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                                     num_hidden_layers=text_layers, num_attention_heads=4, num_key_value_heads=2,
                                     max_position_embeddings=4096, original_max_position_embeddings=4096,
                                     initializer_range=init_std, bos_token_id=tok.bos_token_id,
                                     eos_token_id=[tok.eos_token_id, end], pad_token_id=tok.pad_token_id,
                                     audio_config=audio, vision_config=vision,
                                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                      "partial_rotary_factor": 0.75})
    model = _random_model(tf.Phi4MultimodalForCausalLM, config, seed, [tok.eos_token_id, end], tok.pad_token_id)

    def write_adapter(folder: Path) -> None:
        # The checkpoint's `speech-lora` subfolder: a random, non-zero LoRA over the decoder's projections.
        torch.manual_seed(seed + 1)
        lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["qkv_proj", "o_proj"],
                                                init_lora_weights=False, task_type="CAUSAL_LM"))
        lora.save_pretrained(folder / "speech-lora")
        lora.unload()

    return TinyBuild(model, processor, extra_files=write_adapter)


def _gemma3n(seed: int, init_std: float, text_layers: int) -> TinyBuild:
    import transformers as tf

    names = {"image_token": "<image_soft_token>", "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
             "audio_token": "<audio_soft_token>", "boa_token": "<start_of_audio>", "eoa_token": "<end_of_audio>"}
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    # Gemma 3n's id layout: text ids (boi/boa among them), then the vision block (eoi, image soft token, ...),
    # then the audio block (eoa, audio soft token, ...), all below text_config.vocab_size.
    vision_size, audio_size = 8, 8
    added = [names["boi_token"], names["boa_token"],
             names["eoi_token"], names["image_token"], *[f"<vision_{i}>" for i in range(2, vision_size)],
             names["eoa_token"], names["audio_token"], *[f"<audio_{i}>" for i in range(2, audio_size)]]
    tok = _fast(_sentencepiece_bpe(600, specials), added, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                unk_token="<unk>", extra_special_tokens=names)
    vision_offset, audio_offset = tok.convert_tokens_to_ids(names["eoi_token"]), tok.convert_tokens_to_ids(names["eoa_token"])
    ids = {k: tok.convert_tokens_to_ids(v) for k, v in names.items()}
    features = tf.Gemma3nAudioFeatureExtractor(feature_size=128)
    image = tf.SiglipImageProcessor()
    processor = tf.Gemma3nProcessor(features, image, tok, chat_template=GEMMA3N_TEMPLATE, audio_seq_length=188,
                                    image_seq_length=4)
    text = {"vocab_size": len(tok), "vocab_size_per_layer_input": vision_offset, "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": max(text_layers, 2), "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 16, "hidden_size_per_layer_input": 8, "laurel_rank": 4,
            "altup_num_inputs": 2, "num_kv_shared_layers": 0, "sliding_window": 64,
            "layer_types": ["sliding_attention", "full_attention"] * (max(text_layers, 2) // 2),
            "activation_sparsity_pattern": [0.0] * max(text_layers, 2), "initializer_range": init_std,
            "pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id, "bos_token_id": tok.bos_token_id}
    audio = {"vocab_size": audio_size, "vocab_offset": audio_offset, "input_feat_size": 128, "hidden_size": 32,
             "conf_num_attention_heads": 2, "conf_num_hidden_layers": 2, "sscp_conv_channel_size": [8, 8],
             "conf_attention_chunk_size": 12, "conf_attention_context_left": 13}
    vision = {"vocab_size": vision_size, "vocab_offset": vision_offset, "hidden_size": 32}
    config = tf.Gemma3nConfig(text_config=text, audio_config=audio, vision_config=vision, audio_soft_tokens_per_image=188,
                              vision_soft_tokens_per_image=4, boi_token_id=ids["boi_token"], eoi_token_id=ids["eoi_token"],
                              image_token_id=ids["image_token"], boa_token_id=ids["boa_token"],
                              eoa_token_id=ids["eoa_token"], audio_token_id=ids["audio_token"],
                              initializer_range=init_std)
    from .families import GEMMA3N
    from .frontends import without_towers

    end = tok.convert_tokens_to_ids("<end_of_turn>")
    with without_towers(GEMMA3N):
        model = _random_model(tf.Gemma3nForConditionalGeneration, config, seed, [tok.eos_token_id, end],
                              tok.pad_token_id)
    return TinyBuild(model, processor)


BUILDERS: dict[str, Callable[[int, float, int], TinyBuild]] = {
    "qwen2-audio": lambda s, i, t: _qwen_family("qwen2-audio", s, i, t),
    "audio-flamingo-3": lambda s, i, t: _qwen_family("audio-flamingo-3", s, i, t),
    "qwen2.5-omni": _omni,
    "voxtral": _voxtral,
    "granite-speech": _granite,
    "phi-4-multimodal": _phi4,
    "gemma-3n": _gemma3n,
}


def build_tiny(family: str, *, seed: int = 0, init_std: float = 0.1, text_layers: int = 2) -> tuple[Any, Any]:
    """(model, processor) of the tiny `family`, random weights drawn from `seed` (not saved anywhere)."""
    if family not in BUILDERS:
        raise KeyError(f"no tiny build for family {family!r}; known: {', '.join(TINY_FAMILIES)}")
    built = BUILDERS[family](seed, init_std, text_layers)
    return built.model, built.processor


def cache_root() -> Path:
    """Where saved tiny checkpoints live: $VOCALGRAD_TINY_CACHE, else ~/.cache/vocalgrad/tiny."""
    env = os.environ.get("VOCALGRAD_TINY_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "vocalgrad" / "tiny"


def recipe_key(family: str, seed: int, init_std: float, text_layers: int) -> str:
    """Hash of everything a saved tiny checkpoint depends on (builder inputs, this module's text, versions)."""
    import tokenizers
    import transformers

    # This file's own text: every config value, template, tokenizer recipe and training text lives in it.
    source = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    recipe = {"family": family, "seed": seed, "init_std": init_std, "text_layers": text_layers, "source": source,
              "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def tiny_checkpoint(family: str, *, seed: int = 0, init_std: float = 0.1, text_layers: int = 2) -> Path:
    """The saved tiny checkpoint folder of `family` (built and saved atomically on first use)."""
    target = cache_root() / f"{family}-{recipe_key(family, seed, init_std, text_layers)}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    built = BUILDERS[family](seed, init_std, text_layers)
    # mkdir, not mkdtemp (0700): the saved checkpoint gets the user's umask like every other output
    tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        built.model.save_pretrained(tmp)
        built.processor.save_pretrained(tmp)
        if built.extra_files is not None:
            built.extra_files(tmp)
        try:
            os.replace(tmp, target)  # atomic: a reader sees no folder or a complete one
        except OSError:
            if not (target / "config.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def tiny_model(family: str, *, seed: int = 0, name: str | None = None, **kwargs: Any) -> Any:
    """An HFAudioLM of the tiny `family`, loaded from its saved checkpoint like any real one (CPU by default)."""
    from .families import get_family
    from .hf import HFAudioLM

    spec = get_family(family)
    path = tiny_checkpoint(family, seed=seed)
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("revision", None)
    lm = HFAudioLM(str(path), _local(spec), name=name or f"tiny-{family}", **kwargs)
    # Provenance names the registry entry, not this machine's cache folder (the folder is in `checkpoint`).
    lm.model_id, lm.checkpoint = f"tiny-{family}", str(path)
    lm.kind = "tiny"  # random weights: exempt from the preflight, listed as tiny
    return lm


def _local(spec: Any) -> Any:
    """The family's spec for a local folder: no Hub revision to pin (everything else unchanged)."""
    from dataclasses import replace

    return replace(spec, revision=None)
