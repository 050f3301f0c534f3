"""The worked examples of the "adding a ..." docs pages run as written: every ```python block of a page is
executed in order, in one namespace, in a temporary folder, and the result is checked against values written
by hand (a model card's prompt layout, losses computed from their formulas)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def python_blocks(page: str) -> list[str]:
    """The ```python blocks of a docs page, in order."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def run_page(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Execute a page's Python blocks as one script in tmp_path; its global names afterwards."""
    blocks = python_blocks(page)
    assert blocks, f"docs/{page} has no python block"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": f"docs_example_{page.removesuffix('.md').replace('-', '_')}"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/{page} (python block {i + 1})", "exec"), namespace)  # noqa: S102 - our own docs
    return namespace


def test_adding_a_family_example_loads_and_scores_a_clip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import transformers

    from harness.models.hf import HFAudioLM

    ns = run_page("adding-a-family.md", tmp_path, monkeypatch)
    lm = ns["lm"]
    assert isinstance(lm, HFAudioLM) and lm.spec is ns["CAREFUL"]
    assert isinstance(lm.model, transformers.Qwen2AudioForConditionalGeneration)
    assert ns["ENTRY"].name == "careful-qwen2-audio" and ns["ENTRY"].factory is ns["build"]
    # Qwen2-Audio's ChatML layout (its model card and chat_template.json), with the spec's system turn in place
    # of the template's default "You are a helpful assistant."; text first, as the main prompt puts it.
    expected = ("<|im_start|>system\nYou are a careful listener.<|im_end|>\n<|im_start|>user\n"
                "Does the volume increase or decrease over time?Audio 1: <|audio_bos|><|AUDIO|><|audio_eos|>\n"
                "<|im_end|>\n<|im_start|>assistant\n")
    assert lm._render(lm._conversation(ns["prompt"]), True) == expected
    scores = np.asarray(ns["scores"])
    assert scores.shape == (1, 2) and np.isfinite(scores).all() and (scores < 0).all()  # log-probabilities


def test_adding_a_repair_method_example_computes_the_hinge_loss(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ns = run_page("adding-a-repair-method.md", tmp_path, monkeypatch)
    # margins (policy gain over the reference, chosen minus rejected) of the page's three pairs: 1, 0, -3
    margins = [(-1.0 + 1.5) - (-3.0 + 2.5), (-2.0 + 2.0) - (-1.5 + 1.5), (-4.0 + 2.0) - (-1.0 + 2.0)]
    assert margins == [1.0, 0.0, -3.0]
    assert ns["hinge"].tolist() == pytest.approx([max(0.0, 1 - m) for m in margins])  # beta 1
    assert ns["dpo"].tolist() == pytest.approx([math.log1p(math.exp(-m)) for m in margins], abs=1e-6)
    assert ns["dpo"][1].item() == pytest.approx(math.log(2))
