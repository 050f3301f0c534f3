"""Per-family specs: everything that differs between the transformers audio LMs the generic wrapper drives.

Each spec is data, read off the family's official usage (model card, transformers docs and integration tests,
the installed processor code); the source is named in a comment beside each spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .protocol import Listing


@dataclass(frozen=True)
class Adapter:
    """A LoRA adapter the checkpoint ships and the published inference activates (Phi-4's `speech-lora`)."""

    subfolder: str  # inside the checkpoint repo / directory
    name: str  # adapter name it is loaded and set active under


@dataclass(frozen=True)
class AudioStack:
    """Where the multi-layer audio encoder and the projector feeding the LM sit (the prompt-conditioned layer
    mixer, harness.models.pclm, taps the encoder's layers and gives each its own copy of the projector)."""

    encoder: str  # the audio encoder module, relative to the model
    layers: str  # its ModuleList of transformer layers, relative to the encoder
    projector: str  # the module mapping the encoder's final output to LM embeddings, relative to the model
    # The encoder's own steps after its last layer, applied to every tapped layer too, in order:
    # (module name relative to the encoder, "time" = applied over the time axis (a pooling), "feature").
    post: tuple[tuple[str, Literal["time", "feature"]], ...] = ()


# The Whisper-style towers of Qwen2-Audio and Audio Flamingo 3 end with AvgPool1d(2) over time, then LayerNorm
# (Qwen2AudioEncoder.forward / AudioFlamingo3Encoder.forward), before multi_modal_projector.
WHISPER_STACK = AudioStack(encoder="model.audio_tower", layers="layers", projector="model.multi_modal_projector",
                           post=(("avg_pooler", "time"), ("layer_norm", "feature")))


@dataclass(frozen=True)
class Requirement:
    """An optional package a family needs, with the one-line install hint shown when it is missing."""

    module: str  # importable name
    pip: str  # what to pip install
    why: str


@dataclass(frozen=True)
class PaperRun:
    """How the paper ran a family where that differs from the model card's settings (the default protocol)."""

    # "checkpoint": from_pretrained without a dtype, i.e. transformers 5's "auto": config.json's dtype
    dtype: str
    # "checkpoint": the checkpoint's generation_config as it is (repetition penalty and all), do_sample=False only
    generation: str
    source: str


@dataclass(frozen=True)
class FamilySpec(Listing):
    """How one transformers audio-LM family is loaded, prompted and read."""

    name: str
    model_class: str  # attribute of `transformers` instantiated with from_pretrained
    # The registry entries this family gives (harness list-models): the published checkpoint under its own
    # name (Listing.registry_name), `hf-<name>` for any checkpoint of the family, `tiny-<name>` for tests.
    checkpoint: str = ""
    tiny_description: str = ""
    processor_class: str = "AutoProcessor"
    # "render": the chat template renders text, then processor(text=..., audio=...);
    # "chat": processor.apply_chat_template(tokenize=True) takes the audio itself (Voxtral/mistral-common).
    input_style: Literal["render", "chat"] = "render"
    # "list": user content is a list of {"type": "text"|"audio"} items in prompt order;
    # "string": one string with `audio_placeholder` where each clip goes (templates that join strings).
    content_style: Literal["list", "string"] = "list"
    audio_placeholder: str = ""
    # Where the chat template comes from: the processor's (falling back to the tokenizer's when the
    # processor has none), or the tokenizer's, as the model card calls tokenizer.apply_chat_template.
    template_source: Literal["processor", "tokenizer"] = "processor"
    # How a clip appears in a "chat"-style content item: raw array or base64 WAV.
    chat_audio_field: Literal["audio", "base64"] = "audio"
    audio_kwarg: str = "audio"  # name of the processor's audio argument
    sampling_rate: int = 16000
    # Longest clip the published front end encodes whole (longer ones it would truncate: an error row instead);
    # None where long audio is chunked by the family itself.
    max_audio_seconds: float | None = 30.0
    system_prompt: str | None = None  # None: no system turn from us (the template's default, if any)
    dtype: str = "auto"  # "auto": bfloat16 on GPU, float32 on CPU
    attn_implementation: str | None = "sdpa"
    max_audios: int | None = None  # clips per prompt the chat template can place (None: any)
    submodule: str | None = None  # use this child of the loaded model (Qwen2.5-Omni: the thinker)
    adapter: Adapter | None = None  # LoRA the published inference loads and activates
    # The checkpoint ships a LoRA in its root that transformers loads itself and the model enables for audio.
    builtin_lora: bool = False
    revision: str | None = None  # the Hub revision the transformers-native files live on
    # Modules of the checkpoint an audio-only prompt never reaches; built as empty stand-ins when the
    # package they need is missing (their weights are then skipped on load).
    unused_towers: tuple[str, ...] = ()
    requires: tuple[Requirement, ...] = ()
    extra: str = ""  # the pyproject extra that installs `requires`
    # False: the audio encoder lets a batch's padding leak into a shorter clip's features (no mask, or
    # convolutions over padded frames), so a batch would change the numbers; the wrapper runs one prompt
    # per forward, as the model cards do. (Measured on the tiny models: tests/test_models_families.py.)
    batch_invariant: bool = True
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
    # Pre-LLM audio (SPEC §6): the embeddings the decoder receives at the audio slots, read from
    # (module path, "input" = its inputs_embeds argument | "output" = its output).
    pre_llm_from: tuple[str, Literal["input", "output"]] = ("model.language_model", "input")
    # The encoder + projector layout PCLM attaches to; None where the family has no plain multi-layer encoder
    # feeding a separate projector (see harness.models.pclm for which families and why).
    audio_stack: AudioStack | None = None
    # Which of a clip's audio slots carry the clip (probing pools and picks positions over those only):
    # "all", or the name of the family's length rule in harness.models.hf.SLOT_RULES (Gemma 3n and Voxtral
    # give every clip a fixed block of slots and fill the rest with padding; the rule says how many are real).
    audio_slots: str = "all"
    load_kwargs: dict = field(default_factory=dict)  # extra from_pretrained kwargs (config overrides)
    processor_kwargs: dict = field(default_factory=dict)
    # Generation: greedy decoding (do_sample=False) for every family, as in each model card's example;
    # these are extra generate() kwargs on top.
    generate_kwargs: dict = field(default_factory=dict)
    paper: PaperRun | None = None  # the paper's settings for the families it evaluated (protocol=paper)
    notes: str = ""


_TORCHVISION = Requirement("torchvision", "torchvision", "the image/video sub-processors")

# Qwen/Qwen2-Audio-7B-Instruct model card ("Audio Analysis Inference"): processor.apply_chat_template on list
# content, no system turn (the template adds "You are a helpful assistant."), audio 16 kHz, Whisper front end
# (30 s window), greedy decoding in our protocol. Template: chat_template.json of the checkpoint.
QWEN2_AUDIO = FamilySpec(
    name="qwen2-audio",
    registry_name="qwen2-audio-7b-instruct",
    checkpoint="Qwen/Qwen2-Audio-7B-Instruct",
    description="Qwen/Qwen2-Audio-7B-Instruct",
    tiny_description="random-weight Qwen2-Audio: 2 encoder + 2 decoder layers (tests, benchmarks)",
    model_class="Qwen2AudioForConditionalGeneration",
    fast_encoder="whisper",
    feature_mask_key="feature_attention_mask",
    audio_stack=WHISPER_STACK,
    notes="Template: 'Audio N: <|audio_bos|><|AUDIO|><|audio_eos|>\\n' per clip, in segment order.",
)

# nvidia/audio-flamingo-3-hf model card + transformers docs (model_doc/audioflamingo3): float32 as published,
# one <sound> per user turn placed before the text by the template, 16 kHz, 30 s windows (up to 10 min).
AUDIO_FLAMINGO_3 = FamilySpec(
    name="audio-flamingo-3",
    registry_name="audio-flamingo-3",
    checkpoint="nvidia/audio-flamingo-3-hf",
    description="nvidia/audio-flamingo-3-hf; the paper's settings: the checkpoint's dtype and generation config, "
    "greedy (protocol=card: float32, greedy without the config's sampling/repetition settings)",
    tiny_description="random-weight Audio Flamingo 3: 2 encoder + 2 decoder layers (tests)",
    model_class="AudioFlamingo3ForConditionalGeneration",
    dtype="float32",
    max_audios=1,
    max_audio_seconds=600.0,
    fast_encoder="whisper",
    feature_mask_key="input_features_mask",
    audio_stack=WHISPER_STACK,
    # ynklab/vocalgrad plic/kimi_common.py AudioModelRuntime: from_pretrained(id, device_map="auto") with no
    # dtype, generate(**inputs, max_new_tokens=..., do_sample=False) and nothing else.
    paper=PaperRun(dtype="checkpoint", generation="checkpoint",
                   source="ynklab/vocalgrad plic/kimi_common.py AudioModelRuntime._generate_audioflamingo3"),
    notes="The HF chat template always places <sound> before the turn's text.",
)

# Qwen/Qwen2.5-Omni-7B model card: the thinker answers in text (enable_audio_output=False builds no talker),
# the card's system prompt verbatim, use_audio_in_video=False, 16 kHz Whisper-style front end.
QWEN2_5_OMNI = FamilySpec(
    name="qwen2.5-omni",
    registry_name="qwen2.5-omni-7b",
    checkpoint="Qwen/Qwen2.5-Omni-7B",
    description="Qwen/Qwen2.5-Omni-7B, thinker only (text answers), the card's system prompt",
    tiny_description="random-weight Qwen2.5-Omni thinker (tests)",
    model_class="Qwen2_5OmniForConditionalGeneration",
    processor_class="Qwen2_5OmniProcessor",
    submodule="thinker",
    system_prompt=(
        "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of perceiving "
        "auditory and visual inputs, as well as generating text and speech."
    ),
    position_ids_from_mask=False,  # the thinker computes 3-D multimodal RoPE from the mask itself
    cache_continuation=False,
    extra="vision",
    requires=(_TORCHVISION,),  # only for the video sub-processor; stood in for when missing
    load_kwargs={"enable_audio_output": False},
    processor_kwargs={"use_audio_in_video": False},
)

# mistralai/Voxtral-Mini-3B-2507 model card + transformers docs (model_doc/voxtral): prompts go through
# processor.apply_chat_template (mistral-common builds the tokens), audio as base64 WAV at 16 kHz, padded to
# 30 s chunks; no system prompt; bfloat16 on GPU. The projector output fills the [AUDIO] slots.
VOXTRAL = FamilySpec(
    name="voxtral",
    registry_name="voxtral-mini-3b",
    checkpoint="mistralai/Voxtral-Mini-3B-2507",
    description="mistralai/Voxtral-Mini-3B-2507 (`pip install -e '.[voxtral]'`)",
    tiny_description="random-weight Voxtral, Tekken tokenizer via mistral-common (tests)",
    model_class="VoxtralForConditionalGeneration",
    processor_class="VoxtralProcessor",
    input_style="chat",
    chat_audio_field="base64",
    audio_slots="mistral-common",  # 375 [AUDIO] slots per 30 s chunk, 12.5 per second of the clip
    extra="voxtral",
    max_audio_seconds=None,  # chunked by the model itself
    requires=(Requirement("mistral_common", "mistral-common[audio]>=1.11.5", "Voxtral's tokenizer"),),
    notes="Audio goes through apply_chat_template (mistral-common tokenizer).",
)

GRANITE_SYSTEM_PROMPT = (
    "Knowledge Cutoff Date: April 2024.\nToday's Date: April 9, 2025.\n"
    "You are Granite, developed by IBM. You are a helpful AI assistant"
)

# ibm-granite/granite-speech-3.3-8b model card: system prompt fixed verbatim (above; without it the template
# inserts strftime_now, i.e. the run date), user content one string with "<|audio|>" where the clip goes,
# tokenizer.apply_chat_template, then processor(prompt, wav); 16 kHz mono; the checkpoint's root LoRA is
# enabled by the model for audio inputs; greedy decoding (num_beams=1 in our protocol).
GRANITE_SPEECH = FamilySpec(
    name="granite-speech",
    registry_name="granite-speech-3.3-8b",
    checkpoint="ibm-granite/granite-speech-3.3-8b",
    description="ibm-granite/granite-speech-3.3-8b, the card's fixed system prompt; one clip per forward (mel in plain torch without torchaudio)",
    tiny_description="random-weight Granite Speech with its root LoRA (tests)",
    model_class="GraniteSpeechForConditionalGeneration",
    processor_class="GraniteSpeechProcessor",
    content_style="string",
    audio_placeholder="<|audio|>",
    template_source="tokenizer",
    system_prompt=GRANITE_SYSTEM_PROMPT,
    builtin_lora=True,
    extra="granite",
    batch_invariant=False,
    max_audio_seconds=None,  # chunked by the model itself
    requires=(Requirement("peft", "peft", "the LoRA the checkpoint ships"),),
)

# microsoft/Phi-4-multimodal-instruct, transformers-native files on revision refs/pr/70 (the revision
# transformers' own integration tests pin: tests/models/phi4_multimodal/test_modeling_phi4_multimodal.py,
# "the Phi-4 checkpoint on the hub is not working with the latest Phi-4 code ... (refs/pr/70)"). The speech
# LoRA ships as the `speech-lora` subfolder and must be loaded and set active (transformers docs,
# model_doc/phi4_multimodal: model.load_adapter(..., adapter_kwargs={"subfolder": "speech-lora"});
# model.set_adapter("speech")); without it the model answers "I'm sorry, but I can't listen to audio".
# Template (Phi-4-mini's) joins message['content'] as a string: "<|user|>" + content + "<|end|><|assistant|>",
# with "<|audio|>" in the content where the clip goes.
PHI4_MULTIMODAL = FamilySpec(
    name="phi-4-multimodal",
    registry_name="phi-4-multimodal",
    checkpoint="microsoft/Phi-4-multimodal-instruct",
    description="microsoft/Phi-4-multimodal-instruct @ refs/pr/70, `speech-lora` active; one clip per forward",
    tiny_description="random-weight Phi-4-multimodal with its speech-lora (tests)",
    model_class="Phi4MultimodalForCausalLM",
    processor_class="Phi4MultimodalProcessor",
    content_style="string",
    audio_placeholder="<|audio|>",
    revision="refs/pr/70",
    adapter=Adapter(subfolder="speech-lora", name="speech"),
    decoder_path="model",
    pre_llm_from=("model.embed_tokens_extend", "output"),
    extra="vision",
    batch_invariant=False,
    max_audio_seconds=None,  # chunked by the model itself
    requires=(Requirement("peft", "peft", "the speech-lora adapter"), _TORCHVISION),
    notes="The image processor needs torchvision; stood in for when missing (audio prompts never use it).",
)

# google/gemma-3n-E4B-it model card: processor.apply_chat_template on list content, bfloat16, 16 kHz audio
# (every clip becomes 188 soft tokens, up to 30 s), greedy decoding. The MobileNet vision tower needs timm;
# audio prompts never reach it, so it is built empty when timm is missing.
GEMMA3N = FamilySpec(
    name="gemma-3n",
    registry_name="gemma-3n-e4b",
    checkpoint="google/gemma-3n-E4B-it",
    description="google/gemma-3n-E4B-it; one clip per forward (vision tower built empty without timm)",
    tiny_description="random-weight Gemma 3n, SentencePiece-style BPE (tests)",
    model_class="Gemma3nForConditionalGeneration",
    processor_class="Gemma3nProcessor",
    unused_towers=("vision_tower",),
    audio_slots="gemma3n",  # 188 slots per clip, 6.25 per second of the clip
    extra="gemma3n",
    batch_invariant=False,
    requires=(Requirement("timm", "timm", "the vision tower (unused by audio prompts)"),),
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
