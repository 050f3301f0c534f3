"""MiMo-Audio's fine-tuning loss, as the paper's plic/mimo_finetune.py compute_mimo_text_loss computes it.

The SFT prompt (clip, then text) plus InputSegment(text=f"{label}<|im_end|>\\n"); logits are lm_head over the
main decoder's last hidden state, one position per group of tokens; the loss is the cross-entropy of the
shifted text-group ids, masked for the groups before the prompt's length and for the empty token. all_linear
adapts every linear layer of MimoAudio.model (the audio tokenizer is a separate object, never adapted).
"""

from __future__ import annotations

from typing import Any

import torch

from finetune.runtimes.base import RuntimeTrainer, masked_mean_ce


class MiMoTrainer(RuntimeTrainer):
    """MiMo-Audio: the text groups' masked cross-entropy."""

    name = "mimo-audio"
    excluded = ("audio_tokenizer",)
    source = "ynklab/vocalgrad plic/mimo_finetune.py compute_mimo_text_loss"

    def row_loss(self, lm: Any, model: torch.nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        logits = lm.text_logits(model, batch).float()
        group_ids = lm.text_group_ids(model, batch)
        shift_logits, shift_labels = logits[:, :-1, :], group_ids[:, 1:]
        prompt_groups = int(batch["prompt_token_count"]) // lm.runtime.group_size
        positions = torch.arange(1, group_ids.shape[1], device=group_ids.device).unsqueeze(0)
        mask = (positions >= prompt_groups) & (shift_labels != -100) & (shift_labels != lm.runtime.empty_token)
        return masked_mean_ce(shift_logits, shift_labels, mask)


TRAINER = MiMoTrainer()
