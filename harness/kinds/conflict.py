"""The conflict kind: the main question on carriers whose words claim a direction (lexical conflict).

Rows are grid rows plus what the words claim and whether that agrees with the sound; scored by accuracy on
congruent, incongruent and neutral rows and by claim-following (VoxParadox's ALA on the grid), tested against
chance jointly over a run's configs; its configs are macro-averaged in results.json's `conflict` group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.kinds.base import GRID_ROW_FIELDS, GRID_SAMPLE_FIELDS, Board, Kind, register_kind, word_answers
from harness.metrics import CONFLICT_METRICS, conflict_macro, conflict_summary
from harness.tables import interval, markdown_table, pct

CLAIM_FIELDS: tuple[str, ...] = ("claim", "congruent")  # what the words claim, and do they agree with the sound?
COLUMNS: tuple[tuple[str, str], ...] = (
    ("acc_congruent", "acc congruent"), ("acc_incongruent", "acc incongruent"), ("acc_neutral", "acc neutral"),
    ("claim_following", "claim-following"), ("claim_gap", "Δ = CF − acc incongruent"),
)


def _with_ci(s: Mapping[str, Any], m: str) -> str:
    missing = s.get(f"{m}_ci_low") is None or s.get(f"{m}_ci_high") is None
    return pct(s.get(m)) + ("" if missing else f" {interval(s, m)}")


def _chance_cell(test: Mapping[str, Any] | None) -> str:
    """Claim-following against 0.5, e.g. "above [61.2, 80.3] (p 0.0001, adj. 0.0009)": the verdict, the joint
    interval, and the score test's p unadjusted and adjusted over the run's configs."""
    if not test:
        return "—"
    return (f"{test['vs_chance']} [{pct(test['ci_low'])}, {pct(test['ci_high'])}] "
            f"(p {test['p']:.2g}, adj. {test['p_adjusted']:.2g})")


def conflict_section(res: Mapping[str, Mapping[str, Any]], group: Mapping[str, Any]) -> list[str]:
    """The "Listen or read?" table: each config's congruence accuracies and claim-following with CF tested
    against chance, and the pooled row of results.json's `conflict` group."""
    chance = (group or {}).get("claim_following_vs_chance") or {}
    rows = [[c, *(_with_ci(s, m) for m, _ in COLUMNS), _chance_cell(chance.get(c))]
            for c, s in res.items()]
    if not rows:
        return []
    if group and len(rows) > 1:
        pooled_p = group.get("claim_following_p")
        rows.append(["**pooled**", *(_with_ci(group, m) for m, _ in COLUMNS),
                     "—" if pooled_p is None else f"p {pooled_p:.2g}"])
    m = len(chance)
    return ["## Listen or read? Lexical-conflict configs (%, 95 % CI): accuracy when the words agree with the "
            "sound, contradict it or claim nothing; claim-following = answers equal to the words' claim on "
            "incongruent clips (VoxParadox's ALA)",
            f"CF vs 0.5: above / below / at chance with the {m} config(s) tested together at 95 %: the joint "
            f"interval (Wilson at 1 − 0.05/{m}, all {m} hold at once), the score test's p (the test each Wilson "
            f"interval inverts) and its Bonferroni adjustment (p x {m}). A config's own 95 % interval misses 0.5 "
            "for a fair coin one time in twenty, so over nine configs some config 37 % of the time.",
            markdown_table(["config", *(name for _, name in COLUMNS), "CF vs 0.5"], rows)]


CONFLICT = register_kind(Kind(
    "conflict", "the main question on carriers whose words claim a direction (lexical conflict, VoxParadox's ALA)",
    (*GRID_ROW_FIELDS, *CLAIM_FIELDS), (*GRID_SAMPLE_FIELDS, *CLAIM_FIELDS, "template_id", "voice_id"),
    metrics=conflict_summary, group="conflict", group_metrics=conflict_macro, lm_eval_metrics=CONFLICT_METRICS,
    headline=("claim_following", "claim-following"), section=conflict_section,
    board=Board("Listen or read? Lexical-conflict configs (not ranked)",
                "The words of each clip claim a direction; claim-following is the share of answers equal to that "
                "claim where it contradicts the sound.",
                (("acc_congruent", "acc congruent"), ("acc_incongruent", "acc incongruent"),
                 ("acc_neutral", "acc neutral"), ("claim_following", "claim-following"),
                 ("claim_gap", "Δ (CF − acc incongruent)"))),
    answers=word_answers, claims=True,
))  # fmt: skip
