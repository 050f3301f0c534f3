"""Per-family specs: everything that differs between the transformers audio LMs the generic wrapper drives."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class FamilySpec:
    """How one transformers audio-LM family is loaded, prompted and read."""

    name: str
    model_class: str  # attribute of `transformers` instantiated with from_pretrained
    processor_class: str = "AutoProcessor"
    # "render": the processor's chat template renders text, then processor(text=..., audio=...);
    # "chat": processor.apply_chat_template(tokenize=True) takes the audio itself (Voxtral/mistral-common).
    input_style: Literal["render", "chat"] = "render"
    # "list": user content is a list of {"type": "text"|"audio"} items in prompt order;
    # "string": user content is one string with `audio_placeholder` where each clip goes (Granite).
    content_style: Literal["list", "string"] = "list"
    audio_placeholder: str = ""
    # How a clip appears in a "chat"-style content item: raw array or base64 WAV.
    chat_audio_field: Literal["audio", "base64"] = "audio"
    audio_kwarg: str = "audio"  # name of the processor's audio argument
    sampling_rate: int = 16000
    system_prompt: str | None = None  # None: whatever the template does by default
    dtype: str = "auto"  # "auto": bfloat16 on GPU, float32 on CPU
    attn_implementation: str | None = "sdpa"
    max_audios: int | None = None  # clips per prompt the chat template can place (None: any)
    submodule: str | None = None  # use this child of the loaded model (Qwen2.5-Omni: the thinker)
    # Prompt forward gets position_ids = cumsum(mask) - 1 so left padding does not shift RoPE positions.
    position_ids_from_mask: bool = True
    # Multi-token choices continue from the prompt's KV cache; False re-runs prompt+choice rows instead
    # (needed where positions are not a simple running index, e.g. Qwen2.5-Omni's multimodal RoPE).
    cache_continuation: bool = True
    # "whisper": the audio tower is the Whisper-style encoder harness.models.fast_encoder can truncate.
    fast_encoder: Literal["whisper"] | None = None
    feature_mask_key: str = ""  # processor output naming the valid mel frames (fast encoder)
    decoder_path: str = "model.language_model"  # text decoder module, relative to the model
    lm_head_path: str = "lm_head"
    load_kwargs: dict = field(default_factory=dict)  # extra from_pretrained kwargs (config overrides)
    processor_kwargs: dict = field(default_factory=dict)
    generate_kwargs: dict = field(default_factory=dict)
    revision: str | None = None
    notes: str = ""


QWEN2_AUDIO = FamilySpec(
    name="qwen2-audio",
    model_class="Qwen2AudioForConditionalGeneration",
    fast_encoder="whisper",
    feature_mask_key="feature_attention_mask",
    notes="Template: 'Audio N: <|audio_bos|><|AUDIO|><|audio_eos|>\\n' per clip, in segment order.",
)

AUDIO_FLAMINGO_3 = FamilySpec(
    name="audio-flamingo-3",
    model_class="AudioFlamingo3ForConditionalGeneration",
    dtype="float32",  # published inference runs the checkpoint in float32
    max_audios=1,  # the HF template emits one <sound> per turn, before the text
    fast_encoder="whisper",
    feature_mask_key="input_features_mask",
    notes="The HF chat template always places <sound> before the turn's text.",
)

QWEN2_5_OMNI = FamilySpec(
    name="qwen2.5-omni",
    model_class="Qwen2_5OmniForConditionalGeneration",
    processor_class="Qwen2_5OmniProcessor",
    submodule="thinker",  # text answers only: the talker and token2wav are never run
    system_prompt=(
        "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of perceiving "
        "auditory and visual inputs, as well as generating text and speech."
    ),
    position_ids_from_mask=False,  # the thinker computes 3-D multimodal RoPE from the mask itself
    cache_continuation=False,
    load_kwargs={"enable_audio_output": False},  # the talker is not even built
    processor_kwargs={"use_audio_in_video": False},
)

VOXTRAL = FamilySpec(
    name="voxtral",
    model_class="VoxtralForConditionalGeneration",
    input_style="chat",
    chat_audio_field="base64",
    notes="Needs mistral-common (pip install 'mistral-common[audio]'); audio goes through apply_chat_template.",
)

GRANITE_SPEECH = FamilySpec(
    name="granite-speech",
    model_class="GraniteSpeechForConditionalGeneration",
    content_style="string",
    audio_placeholder="<|audio|>",
)

PHI4_MULTIMODAL = FamilySpec(
    name="phi-4-multimodal",
    model_class="Phi4MultimodalForCausalLM",
    notes="Use the transformers-native checkpoint revision of microsoft/Phi-4-multimodal-instruct.",
)

GEMMA3N = FamilySpec(
    name="gemma-3n",
    model_class="Gemma3nForConditionalGeneration",
    notes="Every clip becomes a fixed 188 audio soft tokens between <start_of_audio>/<end_of_audio>.",
)

FAMILIES: dict[str, FamilySpec] = {
    s.name: s
    for s in (QWEN2_AUDIO, AUDIO_FLAMINGO_3, QWEN2_5_OMNI, VOXTRAL, GRANITE_SPEECH, PHI4_MULTIMODAL, GEMMA3N)
}


def get_family(name: str) -> FamilySpec:
    """The spec registered under name."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown model family {name!r}; known: {', '.join(sorted(FAMILIES))}") from None
