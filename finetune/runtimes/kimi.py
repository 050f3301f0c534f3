"""Kimi-Audio's fine-tuning loss, as the paper's scripts/run/finetune_kimi_vocalgrad_category.py computes it.

The messages (user text, user audio, assistant gold label) go through the prompt manager with output_type
"text" and no assistant start message; the model returns (mimo_output(...), lm_head(...)) and the loss is the
masked cross-entropy of the text head's logits[:, :-1] against text_input_ids[:, 1:] with text_loss_mask[:, 1:]
(the assistant's text tokens and its text end-of-stream token). all_linear adapts every linear layer of
KimiAudio.alm: vq_adaptor, the shared and MIMO layers, lm_head and mimo_output.
"""

from __future__ import annotations

from typing import Any

import torch

from finetune.runtimes.base import RuntimeTrainer, masked_mean_ce


class KimiTrainer(RuntimeTrainer):
    """Kimi-Audio: the text head's masked cross-entropy."""

    name = "kimi-audio"
    input_require_grads = True
    source = "ynklab/vocalgrad scripts/run/finetune_kimi_vocalgrad_category.py _compute_text_loss"

    def row_loss(self, lm: Any, model: torch.nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        text_logits = lm.text_logits(model, batch)  # outputs.logits[1]
        shift_logits = text_logits[:, :-1, :].float()
        return masked_mean_ce(shift_logits, batch["text_input_ids"][:, 1:], batch["text_loss_mask"][:, 1:])


TRAINER = KimiTrainer()
