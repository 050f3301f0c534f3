"""Word error rate: the one edit-distance home for the carrier and VoxParadox-lite Whisper checks (each
normalises text its own way first)."""

from __future__ import annotations

from collections.abc import Sequence


def words_error_rate(reference: Sequence[str], hypothesis: Sequence[str]) -> float:
    """Word-level Levenshtein distance / reference length (1.0 and more: nothing right)."""
    row = list(range(len(hypothesis) + 1))
    for i, r in enumerate(reference, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hypothesis, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1] / max(1, len(reference))
