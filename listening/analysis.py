"""Human-baseline analysis: accuracy with intervals, breakdowns, agreement, and an attention check.

- Intervals are Wilson score intervals: with a few dozen items per annotator and accuracies near 100 %, the
  normal approximation the harness uses for 2,400-clip runs collapses to [1, 1].
- The pooled accuracy is over every answer; its second interval clusters answers by annotator (CR1, the
  harness's `cluster_stderr`), since one annotator's answers are not independent, but only from
  MIN_CLUSTERS (10) annotators on (Cameron & Miller 2015): with fewer the table says "too few clusters".
- Agreement: per pair of annotators, the share of common items answered alike and Cohen's kappa; over
  everyone, Fleiss' kappa in its form for a varying number of raters per item (Fleiss 1971 when every
  item has the same number): P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1)) over items with n_i >= 2,
  p_j = sum_i n_ij / sum_i n_i, kappa = (mean P_i - sum_j p_j^2) / (1 - sum_j p_j^2).
- Attention check: the 'high' tier items are the easiest; an annotator below the threshold on them is
  flagged as careless (default 0.75; humans score 86-100 % on whole categories in the paper).
- Confusion: gold x answer counts per config (for ternary tests: which way the misses go).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from itertools import combinations
from typing import Any

from harness.metrics import Z95, n_clusters, reportable_cluster_stderr, too_few_clusters
from harness.tables import markdown_table, pct

ATTENTION_TIER = "high"
ATTENTION_THRESHOLD = 0.75
LABEL_ORDER = ("increase", "decrease", "constant", "yes", "no")  # the buttons' order


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (nan for n = 0)."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def accuracy(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """n, correct, accuracy and its Wilson interval over answer rows (keys `answer`, `gold`)."""
    k = sum(r["answer"] == r["gold"] for r in rows)
    lo, hi = wilson_interval(k, len(rows))
    return {"n": len(rows), "correct": k, "accuracy": k / len(rows) if rows else math.nan, "ci_low": lo, "ci_high": hi}


def adversarial_agreement(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """ALA over answer rows with an `adversarial` label: the share answered with it (Wilson interval), and
    ala_gap = ALA - accuracy over the same rows."""
    k = sum(r["answer"] == r["adversarial"] for r in rows)
    lo, hi = wilson_interval(k, len(rows))
    ala = k / len(rows) if rows else math.nan
    acc = accuracy(rows)["accuracy"]
    return {"n": len(rows), "agree": k, "ala": ala, "ci_low": lo, "ci_high": hi, "ala_gap": ala - acc}


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float:
    """Fleiss' kappa from an items x categories table of rating counts (rows may sum differently)."""
    rows = [list(map(int, r)) for r in counts if sum(r) >= 2]
    if not rows:
        return math.nan
    n_cat = len(rows[0])
    total = sum(sum(r) for r in rows)
    p_j = [sum(r[j] for r in rows) / total for j in range(n_cat)]
    p_i = [(sum(x * x for x in r) - sum(r)) / (sum(r) * (sum(r) - 1)) for r in rows]
    p_bar, p_e = sum(p_i) / len(p_i), sum(p * p for p in p_j)
    return (p_bar - p_e) / (1 - p_e) if p_e < 1 else math.nan


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters over the same items."""
    n = len(a)
    if n == 0:
        return math.nan
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return (po - pe) / (1 - pe) if pe < 1 else math.nan


def agreement(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Pairwise agreement and Cohen's kappa per annotator pair, and Fleiss' kappa over all items."""
    by_item: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for r in rows:
        by_item[(r["config"], r["benchmark_clip_id"])][r["annotator"]] = r["answer"]
    annotators = sorted({r["annotator"] for r in rows})
    pairs = []
    for x, y in combinations(annotators, 2):
        common = [v for v in by_item.values() if x in v and y in v]
        if common:
            same = sum(v[x] == v[y] for v in common)
            pairs.append({"a": x, "b": y, "n": len(common), "agreement": same / len(common),
                          "cohen_kappa": cohen_kappa([v[x] for v in common], [v[y] for v in common])})
    labels = sorted({r["answer"] for r in rows} | {r["gold"] for r in rows})
    table = [[Counter(v.values())[lab] for lab in labels] for v in by_item.values()]
    rated = [t for t in table if sum(t) >= 2]
    return {
        "pairs": pairs,
        "mean_pairwise_agreement": sum(p["agreement"] for p in pairs) / len(pairs) if pairs else math.nan,
        "fleiss_kappa": fleiss_kappa(rated),
        "fleiss_items": len(rated),
    }


def confusion(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """gold -> answer -> count, every label of the rows on both axes (a ternary test's "constant" bias shows
    here, where accuracy alone hides which way the misses go)."""
    seen = {r["gold"] for r in rows} | {r["answer"] for r in rows}
    labels = [lab for lab in LABEL_ORDER if lab in seen] + sorted(seen - set(LABEL_ORDER))
    counts = Counter((r["gold"], r["answer"]) for r in rows)
    return {g: {a: counts[(g, a)] for a in labels} for g in labels}


def attention(rows: Sequence[Mapping[str, Any]], threshold: float = ATTENTION_THRESHOLD) -> dict[str, dict[str, Any]]:
    """Per annotator: accuracy on the 'high' tier items and whether it falls below the threshold."""
    out = {}
    for name in sorted({r["annotator"] for r in rows}):
        high = [r for r in rows if r["annotator"] == name and r["tier"] == ATTENTION_TIER]
        acc = accuracy(high)
        out[name] = {**acc, "flagged": bool(high) and acc["accuracy"] < threshold}
    return out


def analyze(rows: Sequence[Mapping[str, Any]], threshold: float = ATTENTION_THRESHOLD) -> dict[str, Any]:
    """Everything per config: per-annotator and pooled accuracy, breakdowns, agreement, attention check.

    `rows` are answers with keys annotator, config, benchmark_clip_id, tier, curve, direction, gold, answer
    (as `Store.answers()` returns them).
    """
    out: dict[str, Any] = {}
    for config in dict.fromkeys(r["config"] for r in rows):
        cr = [r for r in rows if r["config"] == config]
        pooled = accuracy(cr)
        names = [r["annotator"] for r in cr]
        se = reportable_cluster_stderr([float(r["answer"] == r["gold"]) for r in cr], names)
        pooled["n_clusters"] = n_clusters(names)
        pooled["annotator_cluster_ci"] = ([max(0.0, pooled["accuracy"] - Z95 * se), min(1.0, pooled["accuracy"] + Z95 * se)]
                                          if not math.isnan(se) else None)
        adversarial = [r for r in cr if r.get("adversarial") is not None]
        if adversarial:  # multiple choice: VoxParadox's ALA, answers equal to the label the transcript asserts
            pooled["ala"] = adversarial_agreement(adversarial)
        out[config] = {
            "pooled": pooled,
            "annotators": {a: accuracy([r for r in cr if r["annotator"] == a]) for a in sorted({r["annotator"] for r in cr})},
            "by": {key: {v: accuracy([r for r in cr if r[key] == v]) for v in dict.fromkeys(r[key] for r in cr)}
                   for key in ("tier", "curve", "direction")},
            "confusion": confusion(cr),
            "agreement": agreement(cr),
            "attention": attention(cr, threshold),
        }
    return out


def catch_report(rows: Sequence[Mapping[str, Any]], threshold: float) -> dict[str, dict[str, Any]]:
    """Per annotator: accuracy on the catch trials (answer rows of kind "catch") and whether it falls below
    the threshold (such an annotator is left out of the scores)."""
    out = {}
    for name in sorted({r["annotator"] for r in rows}):
        acc = accuracy([r for r in rows if r["annotator"] == name])
        out[name] = {**acc, "failed": acc["accuracy"] < threshold}
    return out


def careless(result: Mapping[str, Any]) -> list[str]:
    """Annotators the attention check flags in any config."""
    return sorted({a for c in result.values() for a, v in c["attention"].items() if v["flagged"]})


def _kappa(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.3f}"


def format_analysis(result: Mapping[str, Any]) -> str:
    """The analysis as Markdown tables."""
    parts = ["# Listening test: human accuracy", "Wilson 95 % intervals; pooled = every answer."]
    for config, c in result.items():
        p = c["pooled"]
        cl = p.get("annotator_cluster_ci")
        parts.append(f"## {config}\n\npooled accuracy {pct(p['accuracy'])} % [{pct(p['ci_low'])}, {pct(p['ci_high'])}]"
                     f" over {p['n']} answers" + (f"; clustered by annotator [{pct(cl[0])}, {pct(cl[1])}]" if cl else
                                                  f"; clustered by annotator: {too_few_clusters(p) or '—'}"))
        if "ala" in p:
            a = p["ala"]
            parts.append(f"adversarial-label agreement (ALA) {pct(a['ala'])} % [{pct(a['ci_low'])}, "
                         f"{pct(a['ci_high'])}] over {a['n']} answers; ALA - accuracy {pct(a['ala_gap'])} points")
        att = c["attention"]
        parts.append(markdown_table(["annotator", "n", "acc", "95% CI", f"{ATTENTION_TIER}-tier acc", "careless?"], [
            [a, str(v["n"]), pct(v["accuracy"]), f"[{pct(v['ci_low'])}, {pct(v['ci_high'])}]",
             pct(att[a]["accuracy"]), "FLAGGED" if att[a]["flagged"] else "ok"] for a, v in c["annotators"].items()]))
        for key, vals in c["by"].items():
            parts.append(markdown_table([key, "n", "acc", "95% CI"], [
                [v, str(s["n"]), pct(s["accuracy"]), f"[{pct(s['ci_low'])}, {pct(s['ci_high'])}]"]
                for v, s in vals.items()]))
        conf = c["confusion"]
        parts.append(markdown_table(["gold \\ answer", *conf], [[g, *(str(k) for k in row.values())] for g, row in conf.items()]))
        ag = c["agreement"]
        parts.append(f"agreement: mean pairwise {pct(ag['mean_pairwise_agreement'])} %, Fleiss' kappa "
                     f"{_kappa(ag['fleiss_kappa'])} over {ag['fleiss_items']} items")
        if ag["pairs"]:
            parts.append(markdown_table(["pair", "common items", "agreement", "Cohen's kappa"], [
                [f"{p['a']}-{p['b']}", str(p["n"]), pct(p["agreement"]), _kappa(p["cohen_kappa"])] for p in ag["pairs"]]))
    return "\n\n".join(parts) + "\n"
