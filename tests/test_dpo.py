"""DPO (`--objective dpo`): the loss is TRL's sigmoid DPO loss, the reference is the same model with its LoRA off
(so the first step's loss is ln 2), and chosen/rejected answers come from any row's answer options."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from finetune.objective import AnswerTask, answer_options, dpo_losses
from finetune.settings import TrainSettings
from finetune.train import main

ACCEPTANCE = ["--model", "tiny-qwen2-audio", "--category", "volume", "--source", "demo", "--scope", "all_linear",
              "--max-steps", "2", "--skip-eval"]
FAST = ["--num-workers", "0", "--no-progress", "--val-limit", "2", "--train-limit", "4", "--grad-accum", "2"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _logps(n: int = 6, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return tuple(-10 * torch.rand(n, generator=g) for _ in range(4))


def test_loss_is_the_sigmoid_dpo_formula() -> None:
    pc, pr, rc, rr = _logps()
    beta = 0.1
    # Rafailov et al. 2023, eq. 7, written out: -log sigma(beta log(pi_c/ref_c) - beta log(pi_r/ref_r)).
    by_hand = [-math.log(1 / (1 + math.exp(-(beta * (float(a) - float(c)) - beta * (float(b) - float(d))))))
               for a, b, c, d in zip(pc, pr, rc, rr, strict=True)]
    assert dpo_losses(pc, pr, rc, rr, beta).tolist() == pytest.approx(by_hand, abs=1e-6)
    assert dpo_losses(pc, pr, pc, pr, beta).tolist() == pytest.approx([math.log(2)] * 6, abs=1e-7)


def test_loss_equals_trls_sigmoid_loss() -> None:
    """TRL's own DPOTrainer._compute_loss on the same summed log-probabilities (precomputed reference)."""
    trl = pytest.importorskip("trl")
    pc, pr, rc, rr = _logps(seed=1)
    # One completion token per row: its log-prob is the row's summed log-prob; rows are [chosen..., rejected...].
    outputs = SimpleNamespace(log_probs=torch.cat([pc, pr])[:, None], entropy=torch.zeros(12, 1),
                              mean_logits=torch.zeros(12, 1), is_top1=torch.zeros(12, 1, dtype=torch.bool))
    acc = SimpleNamespace(device="cpu", gather_for_metrics=lambda x: x, gather=lambda x: x)
    trainer = SimpleNamespace(
        model=SimpleNamespace(training=True), accelerator=acc, aux_loss_enabled=False, ld_alpha=None,
        precompute_ref_logps=True, f_divergence_type="reverse_kl", loss_types=["sigmoid"], loss_weights=[1.0],
        beta=0.1, label_smoothing=0.0, use_weighting=False, _metrics=defaultdict(lambda: defaultdict(list)),
        _total_train_tokens=0, _tp_size=1)
    inputs = {"input_ids": torch.zeros(12, 2, dtype=torch.long), "attention_mask": torch.ones(12, 2, dtype=torch.long),
              "completion_mask": torch.tensor([[0, 1]] * 12), "ref_chosen_logps": rc, "ref_rejected_logps": rr}
    trl_loss = trl.DPOTrainer._compute_loss(trainer, lambda **kw: outputs, inputs, False)
    assert float(dpo_losses(pc, pr, rc, rr, 0.1).mean()) == pytest.approx(float(trl_loss), abs=1e-6)


def test_chosen_and_rejected_from_any_rows_options() -> None:
    vocab = AnswerTask.of("default", "volume").vocabulary
    inc, dec = (vocab.words[vocab.labels.index(label)] for label in ("increase", "decrease"))
    up = answer_options({"label": "increase"}, vocab)
    assert (up.answer, up.wrong) == (inc, (dec,))
    assert answer_options({"label": "decrease"}, vocab).pair("random", seed=1, key="c") == (dec, inc)
    # An MCQ row (VoxParadox-style): the answer is chosen, a random wrong option rejected, drawn from (seed, clip).
    mcq = {"benchmark_clip_id": "q1", "options": ["low-high-medium", "high-low-medium", "medium-low-high"],
           "answer": "high-low-medium", "claim": "medium-low-high"}
    opts = answer_options(mcq, vocab)
    drawn = {opts.pair("random", seed=s, key="q1")[1] for s in range(40)}
    assert drawn == {"low-high-medium", "medium-low-high"}
    assert opts.pair("random", seed=3, key="q1") == opts.pair("random", seed=3, key="q1")
    # An incongruent conflict row: the option the transcript claims is the natural rejected answer.
    assert opts.pair("claim", seed=0, key="q1") == ("high-low-medium", "medium-low-high")
    congruent = answer_options({**mcq, "claim": "high-low-medium"}, vocab)
    assert congruent.claim is None and congruent.pair("claim", seed=0, key="q1")[1] != "high-low-medium"
    with pytest.raises(ValueError, match="q9: answer 'x' is not one of its options"):
        answer_options({"benchmark_clip_id": "q9", "options": ["a", "b"], "answer": "x"}, vocab)


def test_method_and_objective_settings() -> None:
    s = TrainSettings(model="m", category="volume", scope="all_linear", out="x", recipe="pclm+dpo")
    s.check()
    assert (s.method, s.objective, s.dpo_beta) == ("pclm", "dpo", 0.1)
    bad = [({"objective": "kto"}, "unknown objective 'kto'"), ({"recipe": "x"}, "unknown recipe 'x'"),
           ({"pclm_taps": [3]}, "go with --method pclm"), ({"dpo_beta": 0.0}, "dpo-beta must be > 0")]
    for kwargs, message in bad:
        with pytest.raises(ValueError, match=message):
            TrainSettings(model="m", category="volume", scope="all_linear", out="x", **kwargs).check()


def test_lora_dpo_run_starts_at_ln2_and_evaluates(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "dpo"
    assert main([*ACCEPTANCE, "--objective", "dpo", "--out", str(out), *FAST]) == 0
    info = json.loads((out / "training.json").read_text())
    assert abs(info["first_loss"] - math.log(2)) <= 1e-4  # the policy equals its reference at step 0
    assert info["dpo"]["first_dpo_loss"] == info["first_loss"] and info["dpo"]["beta"] == 0.1
    assert info["final_loss"] != info["first_loss"]  # the first update moved the policy off its reference
    assert {p.name for p in (out / "adapter").iterdir()} >= {"adapter_config.json", "adapter_model.safetensors"}
    from harness.cli import main as harness_main

    run = tmp_path / "eval"
    assert harness_main(["eval", "--model", "tiny-qwen2-audio", "--adapter", str(out), "--configs", "volume",
                         "--source", "demo", "--limit", "2", "--mode", "choices", "--out", str(run)]) == 0
    results = json.loads((run / "results.json").read_text())
    assert results["metrics"]["volume"]["n"] == 2
