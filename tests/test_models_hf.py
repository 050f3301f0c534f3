"""The generic wrapper's batching, scoring and fast-encoder machinery on the two Whisper-style tiny families
(tests/test_models_families.py runs every family through templates, adapters and hidden states)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.models.base import ItemErrors, ModelError
from harness.models.fast_encoder import build_fast_audio
from harness.models.protocol import Prompt
from harness.models.tiny import tiny_model
from tests.helpers.synthetic_audio import PROMPTS, QUESTION, tone_clip

FAMILIES = ("qwen2-audio", "audio-flamingo-3")
CHOICES = ("increase", "decreasingly")  # the second is several tokens in the tiny vocabulary


@pytest.fixture(scope="module", params=FAMILIES)
def lm(request):
    torch.set_num_threads(2)
    return tiny_model(request.param, batch_size=8)


@pytest.fixture(scope="module")
def scores(lm):
    """The batched scores of PROMPTS, shared by the tests that compare against them."""
    return lm.score_choices(PROMPTS, CHOICES)


def _manual_scores(lm, prompt: Prompt, choices) -> np.ndarray:
    """Summed log-probs of each choice's tokens from one plain stock forward over prompt + rendered answer."""
    out = []
    for choice in choices:
        ids, text = lm._choice_tokens(choice)
        inputs = lm._encode([prompt], suffixes=[text])
        with torch.no_grad():
            logits = lm.model(**inputs).logits[0]
        seq = inputs["input_ids"][0]
        n = len(ids)
        assert seq[-n:].tolist() == ids
        logp = torch.log_softmax(logits[-n - 1 : -1].float(), -1)
        out.append(float(logp.gather(-1, seq[-n:, None]).sum()))
    return np.array(out)


def test_choice_tokens_follow_the_generation_prompt(lm):
    # Rendered exactly as the template writes the assistant's answer: one token in the Qwen BPE (as in the real
    # vocabulary), while a rarer form splits into several.
    ids, rendered = lm._choice_tokens("increase")
    assert rendered == "increase" and len(ids) == 1
    assert lm.tokenizer.decode(ids) == "increase"
    assert len(lm._choice_tokens("decreasingly")[0]) > 2


def test_generate_returns_strings_and_batches_like_singles(lm):
    batched = lm.generate(PROMPTS, max_new_tokens=4)
    assert len(batched) == 3 and all(isinstance(a, str) and a for a in batched)
    singles = [lm.generate([p], max_new_tokens=4)[0] for p in PROMPTS]
    assert batched == singles


def test_score_choices_equals_manual_logprob_sums(lm, scores):
    assert scores.shape == (3, 2) and np.isfinite(scores).all()
    manual = np.stack([_manual_scores(lm, p, CHOICES) for p in PROMPTS])
    np.testing.assert_allclose(scores, manual, rtol=1e-4, atol=1e-4)
    # Rows differ per clip, so a scrambled order would be caught below.
    assert np.abs(scores[0] - scores[1]).max() > 1e-4 and np.abs(scores[1] - scores[2]).max() > 1e-4


def test_batching_restores_order(lm, scores):
    batched = scores
    singles = np.stack([lm.score_choices([p], CHOICES)[0] for p in PROMPTS])
    np.testing.assert_allclose(batched, singles, rtol=1e-5, atol=1e-5)


def test_row_strategy_equals_cache_continuation(lm, scores, monkeypatch):
    from dataclasses import replace

    cached = scores
    monkeypatch.setattr(lm, "spec", replace(lm.spec, cache_continuation=False))
    np.testing.assert_allclose(lm.score_choices(PROMPTS, CHOICES), cached, rtol=1e-4, atol=1e-4)


def test_hidden_states_audio_positions_and_pre_llm(lm):
    batched = lm.hidden_states(PROMPTS[:2])
    n_layers = lm.model.config.text_config.num_hidden_layers
    for b, prompt in enumerate(PROMPTS[:2]):
        captured = []
        projector = lm.model.model.multi_modal_projector
        hook = projector.register_forward_hook(lambda m, i, o, store=captured: store.append(o.detach()))
        try:
            hs = lm.hidden_states([prompt])
        finally:
            hook.remove()
        layers, pos = hs.decoder[0], hs.audio_positions[0]
        mel_frames = int(np.ceil(len(prompt.audios[0].array) * 16000 / prompt.audios[0].sampling_rate / 160))
        n_tokens = (((mel_frames - 1) // 2 + 1) - 2) // 2 + 1
        assert layers.shape[0] == n_layers + 1 and layers.shape[2] == 64
        assert len(pos) == n_tokens and np.all(np.diff(pos) == 1)  # one contiguous run of audio slots
        assert hs.output_position[0] == layers.shape[1] - 1
        # Decoder input at the audio slots == the projector's output (stock encoder, valid prefix).
        np.testing.assert_allclose(layers[0][pos], captured[0][0, :n_tokens].numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(hs.pre_llm_audio[0], layers[0][pos])
        # The batched call (sorted by length, left padded) gives the same per-prompt states, in input order.
        np.testing.assert_array_equal(batched.audio_positions[b], pos)
        np.testing.assert_allclose(batched.decoder[b], layers, rtol=1e-4, atol=1e-4)


def test_oom_halves_the_batch_and_retries(lm, scores, monkeypatch):
    reference = scores
    real = lm._score_batch
    raised = []

    def flaky(prompts, choices):
        if len(prompts) > 1 and not raised:
            raised.append(len(prompts))
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(prompts, choices)

    monkeypatch.setattr(lm, "_score_batch", flaky)
    monkeypatch.setattr(lm, "batch_size", 4)
    monkeypatch.setattr(lm, "stats", {"batch_size": 4, "oom_halvings": 0, "item_errors": 0})
    retried = lm.score_choices(PROMPTS, CHOICES)
    assert raised == [3] and lm.batch_size == 1 and lm.stats["oom_halvings"] == 1
    np.testing.assert_allclose(retried, reference, rtol=1e-5, atol=1e-5)


def test_item_failure_becomes_an_error_row(lm, monkeypatch):
    real = lm._generate_batch

    def broken(prompts, max_new_tokens):
        if any(p.clip_id == "b" for p in prompts):
            raise ValueError("corrupt clip")
        return real(prompts, max_new_tokens)

    monkeypatch.setattr(lm, "_generate_batch", broken)
    items = lm.generate_items(PROMPTS, max_new_tokens=2)
    assert isinstance(items[1], ModelError) and items[1].clip_id == "b" and "corrupt clip" in items[1].message
    assert isinstance(items[0], str) and isinstance(items[2], str)
    with pytest.raises(ItemErrors) as info:
        lm.generate(PROMPTS, max_new_tokens=2)
    assert [type(r) for r in info.value.results] == [str, ModelError, str]


def test_fast_encoder_logits_match_stock(lm, monkeypatch):
    long = Prompt((QUESTION, tone_clip(30.0, 3)), clip_id="long")  # the full window: no frames to skip
    prompts = [*PROMPTS, long]
    inputs = lm._encode(prompts)
    stock = lm._forward_prompt(inputs, use_cache=False, hidden=False).last_logits
    stock_scores = lm.score_choices(prompts, CHOICES)

    frames = []
    hook = lm.model.model.audio_tower.conv1.register_forward_hook(lambda m, i, o: frames.append(i[0].shape[-1]))
    monkeypatch.setattr(lm, "fast", build_fast_audio(lm.model, lm.spec.fast_encoder))
    try:
        fast = lm._forward_prompt(lm._encode(PROMPTS), use_cache=False, hidden=False).last_logits
        assert frames[-1] == 253 + 2  # the longest of PROMPTS has 253 mel frames, + the 2 boundary frames
        fast_all = lm._forward_prompt(inputs, use_cache=False, hidden=False).last_logits
        fast_scores = lm.score_choices(prompts, CHOICES)
    finally:
        hook.remove()
    rel = float((fast_all - stock).abs().max() / stock.abs().max())
    assert rel < 1e-4, rel
    np.testing.assert_allclose(fast.numpy(), stock[:3].numpy(), rtol=1e-4, atol=1e-4 * float(stock.abs().max()))
    np.testing.assert_allclose(fast_scores, stock_scores, rtol=1e-4, atol=1e-4)


def test_af3_refuses_two_clips_per_prompt():
    lm = tiny_model("audio-flamingo-3")
    two = Prompt(("Example:", tone_clip(0.5, 0), "Query:", tone_clip(0.5, 1)), clip_id="fewshot")
    items = lm.generate_items([two, PROMPTS[0]], max_new_tokens=2)
    assert isinstance(items[0], ModelError) and "at most 1 clip" in items[0].message
    assert isinstance(items[1], str)


def test_fast_encoder_generate_equals_the_full_window(lm):
    """Generate mode (the paper's) on the fast encoder: the same greedy strings as the 30 s window, and
    model_info says which path ran."""
    fast = tiny_model(lm.spec.name, batch_size=8, fast_encoder=True)
    assert fast.fast_generate and not lm.fast_generate
    assert fast.generate(PROMPTS, max_new_tokens=12) == lm.generate(PROMPTS, max_new_tokens=12)
    assert fast.provenance()["fast_encoder"] == {"choices": True, "generate": True}
    assert lm.provenance()["fast_encoder"] == {"choices": False, "generate": False}


def test_fast_generate_runs_on_the_fast_embeddings(lm, monkeypatch):
    """The fast path is really taken in generate mode: the stock audio tower is never called."""
    fast = tiny_model(lm.spec.name, batch_size=8, fast_encoder=True)
    calls = []
    hook = fast.model.model.audio_tower.register_forward_hook(lambda *a: calls.append(1))
    try:
        fast.generate(PROMPTS[:1], max_new_tokens=2)
    finally:
        hook.remove()
    assert calls == []


def test_prepared_inputs_are_the_model_calls_own(lm):
    """prepare_prompts (the runner's front-end thread) leaves the exact tensors the call would build, and
    the call uses (and drops) them: same answers, nothing left behind."""
    ready = lm.prepare_prompts(PROMPTS)
    assert [p.clip_id for p in ready] == ["a", "b", "c"]
    assert all(a.sampling_rate == lm.spec.sampling_rate for p in ready for a in p.audios)
    (key, (batch, inputs)), = lm._ready.items()
    own = lm._encode_cpu(batch, None)
    assert own.keys() == inputs.keys() and all(torch.equal(own[k], inputs[k]) for k in own)
    assert lm.generate(ready, max_new_tokens=6) == lm.generate(PROMPTS, max_new_tokens=6)
    assert not lm._ready
