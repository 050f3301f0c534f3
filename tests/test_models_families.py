"""Every transformers family, tiny and random but loaded from a saved checkpoint through HFAudioLM's normal
from_pretrained path: the prompt each renders (against strings written by hand from the model cards), the
adapters each activates, scores against a plain forward, generation, and SPEC §6 hidden states read from
the family's own adapter module."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.models import families as fam
from harness.models.protocol import Prompt
from harness.models.tiny import TINY_FAMILIES, tiny_model
from tests.helpers.synthetic_audio import tone_clip

ALL = list(TINY_FAMILIES)
QUESTION = 'Does the volume increase or decrease over time?\n\nAnswer with only one word: "increase" or "decrease".'
CHOICES = ("increase", "decrease")


PROMPTS = [
    Prompt((QUESTION, tone_clip(1.3, 0)), clip_id="a", meta={"attribute": "volume"}),
    Prompt((QUESTION, tone_clip(5.0, 1, sr=48000)), clip_id="b", meta={"attribute": "volume"}),  # a few seconds, at 48 kHz
]


@pytest.fixture(scope="module", params=ALL)
def lm(request):
    torch.set_num_threads(2)
    return tiny_model(request.param, batch_size=4)


# ---- prompts: expected strings written by hand from each official model card ---------------------------------
CARD_TEXT = "What is the sound in this clip?"
EXPECTED_PROMPT = {
    # Qwen2-Audio-7B-Instruct card, "Audio Analysis Inference": ChatML, default system turn, "Audio 1: ..." line.
    "qwen2-audio": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                   "Audio 1: <|audio_bos|><|AUDIO|><|audio_eos|>\nWhat is the sound in this clip?<|im_end|>\n"
                   "<|im_start|>assistant\n",
    # audio-flamingo-3-hf card: ChatML, <sound> before the turn's text.
    "audio-flamingo-3": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                        "<sound>What is the sound in this clip?<|im_end|>\n<|im_start|>assistant\n",
    # Qwen2.5-Omni-7B card: its system prompt, audio as <|audio_bos|><|AUDIO|><|audio_eos|> with no "Audio 1:".
    "qwen2.5-omni": "<|im_start|>system\nYou are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, "
                    "capable of perceiving auditory and visual inputs, as well as generating text and speech."
                    "<|im_end|>\n<|im_start|>user\n<|audio_bos|><|AUDIO|><|audio_eos|>What is the sound in this clip?"
                    "<|im_end|>\n<|im_start|>assistant\n",
    # granite-speech-3.3-8b card: the fixed system prompt, "<|audio|>" inside the user string.
    "granite-speech": "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024.\nToday's Date: "
                      "April 9, 2025.\nYou are Granite, developed by IBM. You are a helpful AI assistant<|end_of_text|>\n"
                      "<|start_of_role|>user<|end_of_role|><|audio|>What is the sound in this clip?<|end_of_text|>\n"
                      "<|start_of_role|>assistant<|end_of_role|>",
    # Phi-4-multimodal (transformers integration test, refs/pr/70): <|user|><|audio|>text<|end|><|assistant|>.
    "phi-4-multimodal": "<|user|><|audio|>What is the sound in this clip?<|end|><|assistant|>",
    # gemma-3n-E4B-it card: <bos>, turns <start_of_turn>user/model, the audio soft token where the clip goes.
    "gemma-3n": "<bos><start_of_turn>user\n<audio_soft_token>What is the sound in this clip?<end_of_turn>\n"
                "<start_of_turn>model\n",
}


def test_prompt_renders_as_the_model_card_shows(lm):
    card = Prompt((tone_clip(1.0, 3), CARD_TEXT), clip_id="card")  # audio first, as in the cards' examples
    if lm.spec.name == "voxtral":
        # Voxtral-Mini-3B-2507 card: mistral-common instruct tokens <s>[INST][BEGIN_AUDIO][AUDIO]... text [/INST];
        # a 1 s clip is padded to one 30 s chunk: 30 s x 12.5 tokens/s = 375 [AUDIO] tokens.
        ids = lm._encode([card])["input_ids"][0].tolist()
        text = lm.tokenizer.decode(ids, skip_special_tokens=False)
        assert text == "<s>[INST][BEGIN_AUDIO]" + "[AUDIO]" * 375 + CARD_TEXT + "[/INST]"
        return
    assert lm._render(lm._conversation(card), True) == EXPECTED_PROMPT[lm.spec.name]


def test_granite_system_prompt_is_fixed_not_the_run_date():
    lm = tiny_model("granite-speech")
    text = lm._render(lm._conversation(PROMPTS[0]), True)
    assert "Today's Date: April 9, 2025." in text
    # The template alone would date the prompt: what a missing system prompt would have produced.
    undated = lm.tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    assert "April 9, 2025" not in undated and "Today's Date: " in undated


def test_granite_falls_back_to_the_tokenizer_template():
    lm = tiny_model("granite-speech")
    assert not getattr(lm.processor, "chat_template", None)  # the published processor has none
    assert lm._template_owner is lm.tokenizer


# Where the tiny vocabulary splits the answer words (the Qwen ones hold them whole, as the real vocab does).
MULTI_TOKEN = {"voxtral", "granite-speech", "phi-4-multimodal", "gemma-3n"}


def test_answer_words_tokenize_as_the_family_vocabulary_does(lm):
    for word in CHOICES:
        ids, text = lm._choice_tokens(word)
        assert text == word and (len(ids) >= 2) == (lm.spec.name in MULTI_TOKEN), (word, ids)
        assert lm.tokenizer.decode(ids).strip() == word
    assert len(lm._choice_tokens("decreasingly")[0]) >= 2


# ---- adapters -------------------------------------------------------------------------------------------------
def test_checkpoint_adapters_are_loaded_and_active(lm):
    name = lm.spec.name
    expected = {"phi-4-multimodal": ["speech"], "granite-speech": ["default"]}.get(name, [])
    assert lm.active_adapters == expected
    if not expected:
        return
    from peft.tuners.tuners_utils import BaseTunerLayer

    layers = [m for m in lm.model.modules() if isinstance(m, BaseTunerLayer)]
    assert layers and all(m.active_adapters == expected and not m.disable_adapters for m in layers)
    with_lora = lm.score_choices(PROMPTS[:1], CHOICES)
    for m in layers:
        m.enable_adapters(False)
    try:
        without = lm.score_choices(PROMPTS[:1], CHOICES)
    finally:
        for m in layers:
            m.enable_adapters(True)
    assert np.abs(with_lora - without).max() > 1e-3  # the adapter changes what is scored


# ---- scoring and generation -------------------------------------------------------------------------------------
def _plain_forward_scores(lm, prompt: Prompt, choices) -> np.ndarray:
    """Each choice's summed log-probs from one stock forward over the prompt's inputs + the choice's tokens."""
    out = []
    for choice in choices:
        ids, _ = lm._choice_tokens(choice)
        inputs = lm._encode([prompt])
        n = len(ids)
        tail = torch.tensor([ids])
        inputs["input_ids"] = torch.cat([inputs["input_ids"], tail], dim=1)
        inputs["attention_mask"] = torch.cat([inputs["attention_mask"], torch.ones_like(tail)], dim=1)
        if "token_type_ids" in inputs:
            inputs["token_type_ids"] = torch.cat([inputs["token_type_ids"], torch.zeros_like(tail)], dim=1)
        with torch.no_grad():
            logits = lm.model(**inputs).logits[0]
        logp = torch.log_softmax(logits[-n - 1 : -1].float(), -1)
        out.append(float(logp.gather(-1, tail[0][:, None]).sum()))
    return np.array(out)


def test_scores_equal_a_plain_forward_and_batch_like_singles(lm):
    choices = (*CHOICES, "decreasingly")  # the last is several tokens in every tiny vocabulary
    batched = lm.score_choices(PROMPTS, choices)
    assert batched.shape == (2, 3) and np.isfinite(batched).all()
    singles = np.stack([lm.score_choices([p], choices)[0] for p in PROMPTS])
    np.testing.assert_allclose(batched, singles, rtol=1e-4, atol=1e-4)
    manual = np.stack([_plain_forward_scores(lm, p, choices) for p in PROMPTS])
    np.testing.assert_allclose(batched, manual, rtol=1e-4, atol=1e-4)
    assert np.abs(batched[0] - batched[1]).max() > 1e-5  # the audio reaches the answer


def test_generate_batches_like_singles(lm):
    batched = lm.generate(PROMPTS, max_new_tokens=3)
    assert len(batched) == 2 and all(isinstance(a, str) for a in batched)
    assert batched == [lm.generate([p], max_new_tokens=3)[0] for p in PROMPTS]


# ---- hidden states (SPEC §6) ---------------------------------------------------------------------------------------
# Each family's own audio adapter, written here by hand from the transformers modelling code (not from our spec).
ADAPTER_MODULE = {
    "qwen2-audio": "multi_modal_projector", "audio-flamingo-3": "multi_modal_projector",
    "voxtral": "multi_modal_projector", "qwen2.5-omni": "audio_tower", "granite-speech": "projector",
    "phi-4-multimodal": "embed_tokens_extend.audio_embed.down_proj_for_speech", "gemma-3n": "embed_audio",
}


def _adapter_rows(lm, prompt: Prompt) -> np.ndarray:
    """The family's own audio adapter output for one prompt's clip, valid frames only (an independent hook)."""
    name, model = lm.spec.name, lm.model
    inputs = lm._encode([prompt])
    grabbed: dict = {}

    def keep(key):
        return lambda m, a, k, o: grabbed.setdefault(key, []).append((k, o))

    module = model.model.get_submodule(ADAPTER_MODULE.get(name, "embed_audio"))
    hooks = [module.register_forward_hook(keep("adapter"), with_kwargs=True)]
    if name == "gemma-3n":
        hooks.append(model.model.audio_tower.register_forward_hook(keep("tower"), with_kwargs=True))
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in hooks:
            h.remove()
    outputs = [o for k, o in grabbed["adapter"] if name != "gemma-3n" or k.get("inputs_embeds") is not None]
    out = outputs[0]
    out = out if isinstance(out, torch.Tensor) else out.last_hidden_state
    if name in ("qwen2-audio", "audio-flamingo-3"):
        tower = model.model.audio_tower
        n = int(tower._get_feat_extract_output_lengths(inputs[lm.spec.feature_mask_key].sum(-1))[-1][0])
        return out[0, :n].numpy()
    if name in ("qwen2.5-omni", "voxtral"):
        return out.numpy()  # already cut to the clip's tokens (Voxtral: every token of its 30 s chunk)
    if name == "granite-speech":
        return out[0][inputs["input_features_mask"][0]].numpy()
    if name == "phi-4-multimodal":
        return out[0, : int(inputs["audio_embed_sizes"][0])].numpy()
    valid = ~grabbed["tower"][0][1].audio_mel_mask[0]  # Gemma 3n: the encoder's valid frames
    return out[0][valid].numpy()


def test_hidden_states_come_from_the_family_adapter(lm):
    prompt = PROMPTS[0]
    hs = lm.hidden_states([prompt])
    layers, pos = hs.decoder[0], hs.audio_positions[0]
    config = getattr(lm.model.config, "text_config", lm.model.config)
    assert layers.shape[0] == config.num_hidden_layers + 1 and layers.shape[2] == 64
    assert len(pos) > 0 and np.all(np.diff(pos) == 1)  # one contiguous run of audio slots
    assert hs.output_position[0] == layers.shape[1] - 1
    assert hs.pre_llm_audio[0].shape == (len(pos), 64)
    expected = _adapter_rows(lm, prompt)
    # The adapter rows that carry the clip fill the first slots, and only those are read (Gemma 3n pads its fixed
    # 188 slots with a padding embedding, Voxtral's 30 s chunk encodes zeros past the clip).
    n = min(len(expected), len(pos))
    np.testing.assert_allclose(hs.pre_llm_audio[0][:n], expected[:n], rtol=1e-5, atol=1e-5)
    assert len(expected) == len(pos) or (lm.spec.audio_slots != "all" and len(pos) <= len(expected))
    assert "attribute" in hs.text_positions[0] and "query-1" in hs.text_positions[0]
    # Batched (left padded) = per prompt.
    both = lm.hidden_states(PROMPTS)
    np.testing.assert_allclose(both.decoder[0], layers, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(both.audio_positions[0], pos)


def test_missing_pre_llm_module_is_a_clear_error(lm, monkeypatch):
    from dataclasses import replace

    from harness.models.base import ItemErrors

    monkeypatch.setattr(lm, "spec", replace(lm.spec, pre_llm_from=("model.no_such_adapter", "output")))
    with pytest.raises(ItemErrors, match="no module 'model.no_such_adapter'"):
        lm.hidden_states(PROMPTS[:1])


# ---- specs ---------------------------------------------------------------------------------------------------------
def test_specs_carry_the_published_settings():
    assert fam.PHI4_MULTIMODAL.revision == "refs/pr/70"
    assert fam.PHI4_MULTIMODAL.adapter == fam.Adapter(subfolder="speech-lora", name="speech")
    assert fam.PHI4_MULTIMODAL.content_style == "string" and fam.PHI4_MULTIMODAL.audio_placeholder == "<|audio|>"
    assert fam.GRANITE_SPEECH.system_prompt == fam.GRANITE_SYSTEM_PROMPT
    assert fam.GRANITE_SPEECH.template_source == "tokenizer"
    assert fam.AUDIO_FLAMINGO_3.dtype == "float32"
    assert fam.QWEN2_5_OMNI.load_kwargs == {"enable_audio_output": False}


def test_missing_dependency_names_the_pip_command(monkeypatch):
    from harness.models import hf
    from harness.models.base import ModelError

    monkeypatch.setattr(hf, "importable", lambda module: module != "mistral_common")
    with pytest.raises(ModelError, match=r"pip install 'mistral-common\[audio\]>=1.11.5'.*\.\[voxtral\]"):
        hf.check_requirements(fam.VOXTRAL)
    hf.check_requirements(fam.GEMMA3N)  # timm is optional: the vision tower is stood in for


def test_granite_torch_mel_matches_an_independent_reference():
    """The torch-only mel (used where torchaudio cannot load) equals librosa's HTK mel power spectrogram."""
    import librosa

    from harness.models.frontends import TorchMelSpectrogram

    x = tone_clip(0.7, 5).array
    ours = TorchMelSpectrogram(16000, 512, 400, 160, 80)(torch.from_numpy(x)[None])[0].numpy()
    power = np.abs(librosa.stft(x, n_fft=512, hop_length=160, win_length=400, window="hann", center=True,
                                pad_mode="reflect")) ** 2
    reference = librosa.filters.mel(sr=16000, n_fft=512, n_mels=80, fmin=0.0, fmax=8000.0, htk=True, norm=None) @ power
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-6 * float(reference.max()))


@pytest.mark.parametrize("family", ALL)
def test_cli_eval_writes_results_in_both_modes(family, tmp_path):
    from harness import results as res
    from harness.cli import main as harness_cli

    for mode in ("choices", "generate"):
        out = tmp_path / mode
        assert harness_cli(["eval", "--model", f"tiny-{family}", "--configs", "volume", "--source", "demo",
                            "--mode", mode, "--limit", "2", "--max-new-tokens", "2", "--retry-max-new-tokens", "0",
                            "--out", str(out)]) == 0
        rows = res.read_jsonl(res.samples_path(out, "volume"))
        assert len(rows) == 2 and all(r["error"] is None and isinstance(r["raw"], str) for r in rows)
        if mode == "choices":
            assert all(r["pred"] in CHOICES for r in rows)


def test_a_wheel_that_fails_to_load_counts_as_missing(tmp_path, monkeypatch):
    """A CUDA-linked torchaudio/torchvision beside the CPU torch wheel is present but raises on import."""
    from harness.models.frontends import importable

    (tmp_path / "broken_wheel_demo").mkdir()
    (tmp_path / "broken_wheel_demo" / "__init__.py").write_text("raise OSError('libc10_cuda.so: cannot open')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert importable("json") and not importable("no_such_module_here") and not importable("broken_wheel_demo")


def test_a_clip_longer_than_the_front_end_takes_is_an_error_row():
    lm = tiny_model("qwen2-audio")
    items = lm.generate_items([Prompt((QUESTION, tone_clip(31.0, 4)), clip_id="long"), PROMPTS[0]], max_new_tokens=1)
    assert "at most 30 s per clip" in items[0].message and items[0].clip_id == "long"
    assert isinstance(items[1], str)
