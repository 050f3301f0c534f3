"""Fast path for Whisper-style audio towers: encode only the valid mel frames, not 30 s of padding.

Stock Qwen2-Audio / Audio Flamingo 3 pad every clip to 3000 mel frames and then mask the padded
positions out of the encoder's self-attention (transformers 5.x builds the mask from the feature
mask). So the outputs at valid positions depend only on (a) the valid frames and (b) the two padding
frames the stride-1 and stride-2 convolutions read at the boundary. Running the same layers over the
first `max(valid) + 2` frames therefore reproduces the stock features exactly (up to float summation
order), at a fraction of the cost: a 4 s clip is 400 of 3000 frames. tests/test_models_hf.py proves the
logits match the stock forward on the tiny models.
"""

from __future__ import annotations

import torch
from torch import nn

# Families whose greedy generation runs on the fast encoder's embeddings: tests/test_models_hf.py proves the
# greedy strings equal the full-window ones on their tiny models. Any other family generates with the stock
# forward even when fast_encoder is on (model_info records which path ran).
GENERATE_EXACT = frozenset({"qwen2-audio", "audio-flamingo-3"})

# The convolutions (kernel 3, padding 1; then stride 2) read one frame beyond the last valid conv1
# output, which itself reads one mel frame further: two frames past the valid ones.
_BOUNDARY_FRAMES = 2


class WhisperFastAudio:
    """Projected audio embeddings (one (n_tokens, d_text) tensor per clip) from a Whisper-style tower."""

    def __init__(self, tower: nn.Module, projector: nn.Module) -> None:
        self.tower = tower
        self.projector = projector

    @staticmethod
    def token_counts(mel_lengths: torch.Tensor) -> torch.Tensor:
        """Audio tokens per clip: conv2 (stride 2) then the average pool (stride 2)."""
        after_conv = (mel_lengths - 1) // 2 + 1
        return (after_conv - 2) // 2 + 1

    @torch.no_grad()
    def __call__(self, input_features: torch.Tensor, feature_mask: torch.Tensor) -> list[torch.Tensor]:
        from transformers.masking_utils import create_bidirectional_mask

        tower = self.tower
        mel_lengths = feature_mask.sum(-1).long()
        frames = min(input_features.shape[-1], int(mel_lengths.max()) + _BOUNDARY_FRAMES)
        x = input_features[..., :frames].to(device=tower.conv1.weight.device, dtype=tower.conv1.weight.dtype)
        x = nn.functional.gelu(tower.conv1(x))
        x = nn.functional.gelu(tower.conv2(x)).permute(0, 2, 1)
        x = x + tower.embed_positions.weight[: x.shape[1]]
        valid = (mel_lengths - 1) // 2 + 1
        keep = torch.arange(x.shape[1], device=x.device)[None, :] < valid.to(x.device)[:, None]
        mask = create_bidirectional_mask(config=tower.config, inputs_embeds=x, attention_mask=keep.long())
        for layer in tower.layers:
            x = layer(x, mask)
        x = tower.avg_pooler(x.permute(0, 2, 1)).permute(0, 2, 1)
        x = self.projector(tower.layer_norm(x))
        counts = self.token_counts(mel_lengths).tolist()
        return [x[i, :n] for i, n in enumerate(counts)]


def build_fast_audio(model: nn.Module, kind: str | None) -> WhisperFastAudio | None:
    """The fast encoder for a model whose family proved it, else None (callers use the stock forward)."""
    if kind != "whisper":
        return None
    inner = model.model
    return WhisperFastAudio(inner.audio_tower, inner.multi_modal_projector)
