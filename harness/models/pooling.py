"""How a probe reduces one clip's hidden states (SPEC §6), shared by the host and the on-device paths.

A probe reads 16 segment means of a sequence and single positions (the end of each audio quarter, the
output position, named text tokens). The wrappers that can reduce on the accelerator do it there, so only
those few vectors are copied to host memory instead of every layer at every position.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

N_SEGMENTS = 16
QUARTERS = ("a1", "a2", "a3", "a4")


def segment_matrix(length: int, n_segments: int = N_SEGMENTS) -> np.ndarray:
    """(n_segments, length) float64 averaging weights: row k is the mean over segment k's frames."""
    if length <= 0:
        raise ValueError("cannot pool an empty sequence (0 frames)")
    bounds = np.floor(np.linspace(0, length, n_segments + 1)).astype(np.int64)
    weights = np.zeros((n_segments, length))
    for k in range(n_segments):
        lo, hi = bounds[k], bounds[k + 1]
        if hi > lo:
            weights[k, lo:hi] = 1.0 / (hi - lo)
        else:  # L < n_segments: the frame under the segment's midpoint
            mid = (k + 0.5) * length / n_segments
            weights[k, min(int(mid), length - 1)] = 1.0
    return weights


def quarter_ends(n_audio: int) -> list[int]:
    """Index (into the audio positions) of the last token of each audio quarter."""
    return [max(0, math.ceil(q * n_audio / 4) - 1) for q in (1, 2, 3, 4)]


def quarter_positions(audio_pos: Any) -> dict[str, int]:
    """The position of the last audio token of each audio quarter, by name a1..a4 (none without audio)."""
    if len(audio_pos) == 0:
        return {}
    return {q: int(audio_pos[i]) for q, i in zip(QUARTERS, quarter_ends(len(audio_pos)), strict=True)}


def pool_on_device(x: Any, n_segments: int = N_SEGMENTS) -> np.ndarray:
    """(L, d) torch tensor -> (n_segments, d) float32 numpy segment means, reduced where `x` lives.

    float64 like the host path (pool_segments), so both give the same stored float16 features; devices
    without float64 (Apple MPS) reduce in float32."""
    import torch

    dtype = torch.float32 if x.device.type == "mps" else torch.float64
    weights = torch.from_numpy(segment_matrix(x.shape[0], n_segments)).to(x.device, dtype)
    return (weights @ x.to(dtype)).float().cpu().numpy()
