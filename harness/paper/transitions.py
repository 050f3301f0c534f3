"""Table 22's additions (appendix C.13): macro precision and recall, the prediction-transition statistic and
the published values beside ours.

The transition statistic is the paper's (ynklab/vocalgrad scripts/analysis/analyze_meld_emotion_transfer.py):
of the items the base model predicts as class X, the share the tuned model predicts as class Y, on the same
items. The paper discusses Neutral -> Joy: 25.8 % of the base Kimi-Audio's Neutral predictions become Joy after
Voice-Pitch tuning. Its published macro-F1 (%): 41.3 base, 37.7 Volume-tuned, 34.2 Pitch-tuned Kimi-Audio, each
the unweighted mean over the seven emotions of per-class F1 (0 where undefined), as ours is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import mean
from typing import Any

from harness.tables import markdown_table, pct

# The paper's Table 22 (Kimi-Audio, MELD test, option-letter logits), by the suite's run names.
PUBLISHED_MACRO_F1 = {"meld-base": 0.413, "meld-volume": 0.377, "meld-pitch": 0.342}
PUBLISHED_MODEL = "kimi-audio"
# (from, to, the tuned run, share): the transition the paper's text reports.
PUBLISHED_TRANSITION = ("neutral", "joy", "meld-pitch", 0.258)
UNPARSED = "unparsed"


def macro(metrics: Mapping[str, Any], labels: Sequence[str], name: str) -> float:
    """The unweighted mean over the labels of a per-class metric (precision, recall or f1)."""
    return mean(float(metrics[f"{name}_{lab}"]) for lab in labels)


def transitions(base: Sequence[str | None], tuned: Sequence[str | None],
                labels: Sequence[str]) -> dict[str, dict[str, tuple[int, int]]]:
    """For each base prediction X: {Y: (items the tuned run predicts Y among them, items predicted X by the base)},
    unparsed or failed answers as "unparsed"; the two runs' items are paired by position."""
    names = [*labels, UNPARSED]
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for x in names:
        picked = [t for b, t in zip(base, tuned, strict=True) if (b if b in labels else UNPARSED) == x]
        out[x] = {y: (sum((t if t in labels else UNPARSED) == y for t in picked), len(picked)) for y in names}
    return out


def transition_table(base: Sequence[str | None], tuned: Sequence[str | None], labels: Sequence[str]) -> str:
    """Rows: the base model's prediction (with its count); columns: the tuned model's; cells: % of the row."""
    table = transitions(base, tuned, labels)
    rows = []
    for x, cells in table.items():
        n = next(iter(cells.values()))[1]
        if n:
            rows.append([f"{x} (n={n})", *(pct(k / n) for k, _ in cells.values())])
    return markdown_table(["base \\ tuned", *table], rows)


def headline_transition(base: Sequence[str | None], tuned: Sequence[str | None], labels: Sequence[str]) -> str:
    """The published transition's share on these runs: "25.8 % (31 of 120)"; "—" when the base never predicts it."""
    x, y, _, _ = PUBLISHED_TRANSITION
    k, n = transitions(base, tuned, labels)[x][y]
    return f"{pct(k / n)} % ({k} of {n})" if n else "—"


def published_rows(runs: Sequence[tuple[str, str, float | None]]) -> str:
    """(run name, label, our macro-F1) rows beside the published macro-F1 of the paper's run of that name."""
    body = [[label, pct(ours), pct(PUBLISHED_MACRO_F1.get(name))] for name, label, ours in runs]
    return markdown_table(["model", "macro-F1 (this run)", f"macro-F1 (published, {PUBLISHED_MODEL})"], body)
