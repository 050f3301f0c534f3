"""Tiny, randomly initialised (seeded) Qwen2-Audio and Audio Flamingo 3: the real transformers classes and
processors with small configs and a tokenizer built offline, so the whole model path runs in tests on CPU."""

from __future__ import annotations

from typing import Any

from .families import AUDIO_FLAMINGO_3, QWEN2_AUDIO, FamilySpec

# Words the prompts use become single tokens; anything else (e.g. "decreasingly") splits into pieces,
# which is what the multi-token scoring tests need.
_WORDS = (
    "Does the increase or decrease over time ? Answer with only one word : \" . increases decreases "
    "speaking speed voice pitch volume audio distortion roughness background noise echo clarity vibration "
    "of this clip How vary Example label Query For query answer same question increasing decreasing "
    "rise fall yes no constant You are a helpful assistant system user Audio"
)

# The Audio Flamingo 3 processor template (nvidia/audio-flamingo-3-hf): one <sound> per turn, before the text.
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

_CHAT_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_AUDIO_SPECIALS = {
    QWEN2_AUDIO.name: ("<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"),
    AUDIO_FLAMINGO_3.name: ("<sound>",),
}


def build_tokenizer(audio_specials: tuple[str, ...]) -> Any:
    """A byte-level BPE tokenizer (Qwen-style pre-tokenisation) whose merges make each of _WORDS one token."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    merges: list[tuple[str, str]] = []
    for word in _WORDS.split():
        for form in (word, " " + word):
            (piece, _), = byte_level.pre_tokenize_str(form)
            left = piece[0]
            for ch in piece[1:]:
                if left + ch not in vocab:
                    vocab[left + ch] = len(vocab)
                    merges.append((left, ch))
                left += ch
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in _CHAT_SPECIALS + audio_specials])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", model_max_length=32768
    )


def build_tiny(family: str, *, seed: int = 0, init_std: float = 0.1, text_layers: int = 2) -> tuple[Any, Any]:
    """(model, processor) for "qwen2-audio" or "audio-flamingo-3", random weights drawn from `seed`."""
    import torch
    import transformers as tf

    tokenizer = build_tokenizer(_AUDIO_SPECIALS[family])
    features = tf.WhisperFeatureExtractor(feature_size=128, return_attention_mask=True)
    audio_token = _AUDIO_SPECIALS[family][0]
    text = tf.Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=text_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        initializer_range=init_std,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    # The encoder always sees 1500 positions (30 s) on the stock path, so it is kept narrower than the decoder.
    encoder = {"num_mel_bins": 128, "encoder_layers": 2, "encoder_attention_heads": 2, "encoder_ffn_dim": 64,
               "d_model": 32, "max_source_positions": 1500, "initializer_range": init_std}
    if family == QWEN2_AUDIO.name:
        processor = tf.Qwen2AudioProcessor(feature_extractor=features, tokenizer=tokenizer)
        config = tf.Qwen2AudioConfig(
            audio_config={"model_type": "qwen2_audio_encoder", **encoder},
            text_config=text,
            audio_token_index=tokenizer.convert_tokens_to_ids(audio_token),
        )
        model_class = tf.Qwen2AudioForConditionalGeneration
    elif family == AUDIO_FLAMINGO_3.name:
        processor = tf.AudioFlamingo3Processor(features, tokenizer, chat_template=AF3_CHAT_TEMPLATE)
        config = tf.AudioFlamingo3Config(
            audio_config={"model_type": "audioflamingo3_encoder", **encoder},
            text_config=text,
            audio_token_id=tokenizer.convert_tokens_to_ids(audio_token),
        )
        model_class = tf.AudioFlamingo3ForConditionalGeneration
    else:
        raise KeyError(f"no tiny build for family {family!r}")
    torch.manual_seed(seed)
    model = model_class._from_config(config, attn_implementation="sdpa").eval()
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.pad_token_id]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, processor


def tiny_model(family: str, *, seed: int = 0, name: str | None = None, **kwargs: Any) -> Any:
    """An HFAudioLM around a freshly built tiny model (CPU unless `device` says otherwise)."""
    from .hf import HFAudioLM

    spec: FamilySpec = {QWEN2_AUDIO.name: QWEN2_AUDIO, AUDIO_FLAMINGO_3.name: AUDIO_FLAMINGO_3}[family]
    model, processor = build_tiny(family, seed=seed)
    kwargs.setdefault("device", "cpu")
    return HFAudioLM(f"tiny-{family}", spec, name=name or f"tiny-{family}", model=model, processor=processor, **kwargs)
