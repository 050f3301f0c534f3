"""Stop strings per row: a batch ends once every row has answered, and answers are cut at the stop string."""

from __future__ import annotations

import pytest
import torch

from harness.models.tiny import tiny_model
from tests.helpers.synthetic_audio import PROMPTS


@pytest.fixture(scope="module")
def lm():
    torch.set_num_threads(2)
    return tiny_model("qwen2-audio", batch_size=8)


def _tokens(lm, monkeypatch, max_new_tokens):
    """The answers and each row's new token ids (captured from the final decode)."""
    seen = []
    real = lm.tokenizer.batch_decode

    def capture(ids, **kw):
        seen.append(ids)
        return real(ids, **kw)

    monkeypatch.setattr(lm.tokenizer, "batch_decode", capture)
    texts = lm.generate(PROMPTS, max_new_tokens=max_new_tokens)
    monkeypatch.undo()
    return texts, seen[-1]


def test_batch_ends_when_every_row_has_its_stop_string(lm, monkeypatch):
    full, ids = _tokens(lm, monkeypatch, 16)
    decode = lm.tokenizer.decode
    # a stop string from each row's own answer, a few tokens in: rows stop at different steps
    assert all(len(t) >= 6 for t in full)
    stops = tuple(dict.fromkeys(t[3:5] for t in full))

    def first_step(r):  # generated tokens after which row r's text holds a stop string
        return next(k for k in range(1, ids.shape[1] + 1)
                    if any(s in decode(ids[r, :k], skip_special_tokens=True) for s in stops))

    steps = max(first_step(r) for r in range(len(full)))
    assert steps < 16
    calls = []
    stopping = tiny_model("qwen2-audio", batch_size=8, stop_strings=list(stops))
    hook = stopping.model.lm_head.register_forward_hook(lambda *a: calls.append(1))
    try:
        got = stopping.generate(PROMPTS, max_new_tokens=16)
    finally:
        hook.remove()
    assert len(calls) == steps  # one forward per new token, and not one more once every row has stopped
    for text, answer in zip(full, got, strict=True):
        cut = min(i for i in (text.find(s) for s in stops) if i >= 0)
        assert answer == text[:cut]
    assert stopping.provenance()["stop_strings"] == list(stops)
