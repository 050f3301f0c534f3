"""Metrics over samples rows (SPEC §5): accuracies, bias, exact match, intervals, paired tests.

Conventions:
- Headline accuracy is over all clips: unparsed and error rows count as wrong.
- 95 % intervals of a proportion are Wilson score intervals (scipy's `binomtest(k, n).proportion_ci(
  method="wilson")`; the 9-category mean's at its effective sample size p(1−p)/se²): unlike
  p ± 1.96·sqrt(p(1−p)/n) they never collapse to [0, 0] at 0/n or [1, 1] at n/n and keep their coverage
  at small n. At n = 2,400 they agree with the paper's parametric bootstrap of
  Binomial(n, p̂) to 0.1 point. `accuracy_stderr` stays the binomial sqrt(p(1−p)/n) (lm-evaluation-harness's
  convention).
- Clustered intervals treat the rows of one source clip as a cluster (the 24 conditions of a clip share
  its speaker and sentence): CR1 sandwich variance G/(G−1)·Σ_g(Σ_{i∈g} w_i(y_i − p))². Rows without a
  cluster id give no clustered SE (None), never a row-level SE dressed up as one. Below MIN_CLUSTERS
  clusters no clustered SE or interval is reported either (None; tables say "too few clusters"): the CR1
  sandwich is biased downwards and its normal interval under-covers when clusters are few (Cameron &
  Miller 2015, "A Practitioner's Guide to Cluster-Robust Inference", J. Human Resources 50(2), sec. VI:
  with few clusters, "few" starting well above 10). 10 is the floor this harness uses; with 3 source clips
  (the demo) or 2 annotators the Wilson interval is the one to read. `n_clusters` says how many there were.
- McNemar: exact two-sided binomial test on the discordant pairs (scipy `binomtest(b, b + c, 1/2)`),
  p = min(1, 2·P(X ≤ min(b, c))), X ~ Binomial(b + c, 1/2).
- Macro-F1 (yes/no and ternary formats, SPEC §4): per gold class, precision = TP / predictions of that
  class, recall = TP / gold rows of that class (so an unparsed or error row is a miss of its true class
  and never a prediction), F1 = 2PR / (P + R) (0 when P + R = 0); the unweighted mean over the gold
  classes present. Balanced accuracy is likewise the mean recall over the gold classes present.
- Chance tests (claim-following against 0.5): the score test, which the Wilson interval inverts, so a config's
  own 95 % interval excludes 0.5 exactly when p < 0.05. Tested on several configs at once, the family's
  claim is held at 95 % by Bonferroni: p·m and Wilson intervals at 1 − 0.05/m (m configs).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import numpy as np

from harness.parsing import INCREASE, is_exact, row_parser

Z95 = 1.959963984540054  # two-sided 95 % normal quantile
BREAKDOWN_KEYS: tuple[str, ...] = ("tier", "curve", "direction")
MIN_CLUSTERS = 10  # below this many clusters no cluster-robust SE or interval (Cameron & Miller 2015, sec. VI)


def binomial_interval(k: int, n: int, confidence: float = 0.95, method: str = "wilson") -> tuple[float, float]:
    """Wilson score (or "exact" Clopper-Pearson) interval for k successes in n trials; NaNs when n = 0."""
    if n == 0:
        return (float("nan"), float("nan"))
    from scipy.stats import binomtest  # lazy: scipy.stats costs ~0.5 s of start-up

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method=method)
    return (float(ci.low), float(ci.high))


def wilson_interval(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion p observed over an *effective* sample size n (not a whole
    number in general, so not scipy's binomtest): (p + z²/2n ± z·sqrt(p(1−p)/n + z²/4n²)) / (1 + z²/n)."""
    if not n > 0 or math.isnan(p):
        return (float("nan"), float("nan"))
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, (centre - half) / (1 + z * z / n)), min(1.0, (centre + half) / (1 + z * z / n)))


def score_test_p(k: int, n: int, p0: float = 0.5) -> float:
    """Two-sided p-value of k successes in n against the share p0 by the score test, the test the Wilson
    interval inverts: p0 lies in the Wilson interval at confidence c exactly when this p >= 1 − c."""
    if n == 0:
        return float("nan")
    z = (k - n * p0) / math.sqrt(n * p0 * (1 - p0))
    return math.erfc(abs(z) / math.sqrt(2))


class ChanceTest(TypedDict):
    """One share tested against chance as one of `n_tests` tested together (e.g. a model's claim-following on
    each of the nine conflict configs): `ci_low`/`ci_high` is the Wilson interval at confidence
    1 − (1 − family_confidence)/n_tests (Bonferroni), so all n_tests intervals hold at once with
    `family_confidence`; it contains p0 exactly when `p_adjusted` = min(1, n_tests·p) >= 1 − family_confidence."""

    share: float
    k: int
    n: int
    p: float  # the score test's two-sided p, unadjusted (p0 in the config's own 95 % interval iff p >= 0.05)
    p_adjusted: float  # Bonferroni over n_tests
    ci_low: float
    ci_high: float
    vs_chance: Literal["above", "below", "at chance"]  # at family_confidence


def chance_tests(counts: Mapping[str, tuple[int, int]], p0: float = 0.5,
                 family_confidence: float = 0.95) -> dict[str, ChanceTest]:
    """Each (k, n) of `counts` (n > 0) tested against p0 with the family's error rate held at
    1 − family_confidence over all of them: a fair coin's share lies outside its own 95 % interval on one
    config in twenty, so on some config of nine 37 % of the time, which says nothing about the coin."""
    tested = {name: (k, n) for name, (k, n) in counts.items() if n > 0}
    m = len(tested)
    out: dict[str, ChanceTest] = {}
    for name, (k, n) in tested.items():
        p = score_test_p(k, n, p0)
        lo, hi = binomial_interval(k, n, confidence=1 - (1 - family_confidence) / m)
        adjusted = min(1.0, m * p)
        verdict: Literal["above", "below", "at chance"] = (
            "at chance" if adjusted >= 1 - family_confidence else "above" if k / n > p0 else "below")
        out[name] = ChanceTest(share=k / n, k=k, n=n, p=p, p_adjusted=adjusted, ci_low=lo, ci_high=hi,
                               vs_chance=verdict)
    return out


def binomial_stderr(k: int, n: int) -> float:
    """sqrt(p(1−p)/n)."""
    return math.sqrt((k / n) * (1 - k / n) / n) if n else float("nan")


def cluster_stderr(values: Sequence[float], clusters: Sequence[Any], weights: Sequence[float] | None = None,
                   means: Sequence[float] | None = None) -> float:
    """Cluster-robust (CR1) standard error of the weighted mean Σ w_i y_i (weights default to 1/n).

    `means` gives each row's group mean when the estimate is a mean of group means (9-category mean).
    """
    y = np.asarray(values, dtype=np.float64)
    n = len(y)
    if n == 0 or any(c is None for c in clusters):  # no (complete) clustering given: no clustered SE
        return float("nan")
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=np.float64)
    mu = np.full(n, float(np.sum(w * y))) if means is None else np.asarray(means, dtype=np.float64)
    psi = w * (y - mu)
    sums: dict[Any, float] = defaultdict(float)
    for c, v in zip(clusters, psi, strict=True):
        sums[c] += float(v)
    g = len(sums)
    if g < 2:
        return float("nan")
    return math.sqrt(g / (g - 1) * sum(s * s for s in sums.values()))


def n_clusters(clusters: Sequence[Any]) -> int | None:
    """How many distinct clusters; None when any row has no cluster id (no clustering given)."""
    return None if not clusters or any(c is None for c in clusters) else len(set(clusters))


def reportable_cluster_stderr(values: Sequence[float], clusters: Sequence[Any], **kw: Any) -> float:
    """`cluster_stderr`, or NaN (not reported) with fewer than MIN_CLUSTERS clusters."""
    g = n_clusters(clusters)
    return cluster_stderr(values, clusters, **kw) if g is not None and g >= MIN_CLUSTERS else float("nan")


def too_few_clusters(summary: Mapping[str, Any]) -> str | None:
    """The table cell for a clustered interval that is not reported for lack of clusters, else None."""
    g = summary.get("n_clusters")
    return f"too few clusters ({g} < {MIN_CLUSTERS})" if g is not None and g < MIN_CLUSTERS else None


def finite_or_none(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics with every undefined float (NaN, inf) as None, so JSON holds null, never NaN."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in metrics.items()}


def _pred(row: Mapping[str, Any]) -> str | None:
    return None if row.get("error") else row.get("pred")


def _correct(row: Mapping[str, Any]) -> bool:
    return _pred(row) is not None and _pred(row) == row["gold"]


def _ambiguous(row: Mapping[str, Any]) -> bool:
    if row.get("error") or row.get("mode") == "choices":
        return False
    return row_parser(row).is_ambiguous(row.get("raw"))


def _exact(row: Mapping[str, Any]) -> bool:
    if row.get("error"):
        return False
    return is_exact(row.get("raw"), row.get("answer_words") or ("increase", "decrease"))


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """All metrics of one set of rows (one config, or one breakdown cell); undefined values are None."""
    n = len(rows)
    correct = [_correct(r) for r in rows]
    preds = [_pred(r) for r in rows]
    exact = [_exact(r) for r in rows]
    n_correct, n_parsed = sum(correct), sum(p is not None for p in preds)
    n_increase = sum(p == INCREASE for p in preds)
    lo, hi = binomial_interval(n_correct, n)
    clusters = [r.get("source_clip_id") for r in rows]
    se_cl = reportable_cluster_stderr([float(c) for c in correct], clusters)
    recalls, gold_sizes = [], []
    for gold in _gold_classes(rows):
        idx = [i for i, r in enumerate(rows) if r["gold"] == gold]
        recalls.append(sum(correct[i] for i in idx) / len(idx))
        gold_sizes.append(len(idx))
    acc = n_correct / n if n else float("nan")
    n_exact, n_exact_right = sum(exact), sum(e and c for e, c in zip(exact, correct, strict=True))
    recall_var = [r * (1 - r) / m for r, m in zip(recalls, gold_sizes, strict=True)]
    return finite_or_none({
        "n": n,
        "n_correct": n_correct,
        "n_parsed": n_parsed,
        "n_unparsed": n - n_parsed,
        "n_ambiguous": sum(_ambiguous(r) for r in rows),
        "n_error": sum(bool(r.get("error")) for r in rows),
        "accuracy": acc,
        "accuracy_stderr": binomial_stderr(n_correct, n),
        "accuracy_ci_low": lo,
        "accuracy_ci_high": hi,
        "n_clusters": n_clusters(clusters),
        "accuracy_cluster_stderr": se_cl,
        "accuracy_cluster_ci_low": max(0.0, acc - Z95 * se_cl) if not math.isnan(se_cl) else float("nan"),
        "accuracy_cluster_ci_high": min(1.0, acc + Z95 * se_cl) if not math.isnan(se_cl) else float("nan"),
        "parsed_accuracy": n_correct / n_parsed if n_parsed else float("nan"),
        "parsed_accuracy_stderr": binomial_stderr(n_correct, n_parsed),
        "balanced_accuracy": sum(recalls) / len(recalls) if recalls else float("nan"),
        # the recalls are independent binomials over disjoint rows: var = Σ r(1−r)/n_g / K²
        "balanced_accuracy_stderr": math.sqrt(sum(recall_var)) / len(recalls) if recalls else float("nan"),
        "macro_f1": macro_f1(rows),
        "macro_f1_stderr": None,  # no closed form (a ratio of dependent counts); never a made-up number
        "increase_ratio": n_increase / n_parsed if n_parsed else float("nan"),
        "increase_ratio_stderr": binomial_stderr(n_increase, n_parsed),
        "increase_ratio_all": n_increase / n if n else float("nan"),
        "increase_ratio_all_stderr": binomial_stderr(n_increase, n),
        "exact_match_rate": n_exact / n if n else float("nan"),
        "exact_match_rate_stderr": binomial_stderr(n_exact, n),
        "exact_match_accuracy": n_exact_right / n if n else float("nan"),
        "exact_match_accuracy_stderr": binomial_stderr(n_exact_right, n),
    })


def _gold_classes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Gold labels present, increase/decrease first (their historical order), then the rest sorted."""
    present = {r["gold"] for r in rows}
    return [g for g in ("increase", "decrease") if g in present] + sorted(present - {"increase", "decrease"})


def f1_by_class(rows: Sequence[Mapping[str, Any]], labels: Sequence[str] | None = None) -> dict[str, float]:
    """F1 per gold class (module docstring); unparsed and error rows count only against their true class."""
    labels = list(labels) if labels is not None else _gold_classes(rows)
    out = {}
    for label in labels:
        tp = sum(1 for r in rows if r["gold"] == label and _pred(r) == label)
        n_pred = sum(1 for r in rows if _pred(r) == label)
        n_gold = sum(1 for r in rows if r["gold"] == label)
        precision = tp / n_pred if n_pred else 0.0
        recall = tp / n_gold if n_gold else 0.0
        out[label] = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return out


def macro_f1(rows: Sequence[Mapping[str, Any]], labels: Sequence[str] | None = None) -> float:
    """Unweighted mean of the per-class F1 over the gold classes present (or `labels`)."""
    f1 = f1_by_class(rows, labels)
    return sum(f1.values()) / len(f1) if f1 else float("nan")


CLIP_TYPES: dict[str, str] = {"up": "increasing", "down": "decreasing", "none": "source"}  # by row direction


def prediction_distribution(rows: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> dict[str, dict[str, float]]:
    """Share of each prediction (labels + "unparsed") within each clip type (increasing, decreasing, source).

    Every row counts in its clip type's denominator; unparsed and error rows are "unparsed" (the paper's
    Table 17 per category, before averaging over categories).
    """
    out: dict[str, dict[str, float]] = {}
    for direction, clip_type in CLIP_TYPES.items():
        group = [r for r in rows if r.get("direction") == direction]
        if not group:
            continue
        preds = [_pred(r) if _pred(r) in labels else "unparsed" for r in group]
        out[clip_type] = {p: preds.count(p) / len(group) for p in [*labels, "unparsed"]}
    return out


def breakdowns(rows: Sequence[Mapping[str, Any]], keys: Iterable[str] = BREAKDOWN_KEYS) -> dict[str, dict[str, Any]]:
    """summarize() per value of each key (tier, curve, direction), values in first-seen order."""
    out: dict[str, dict[str, Any]] = {}
    for key in keys:
        groups: dict[str, list[Mapping[str, Any]]] = {}
        for r in rows:
            groups.setdefault(str(r.get(key)), []).append(r)
        out[key] = {value: summarize(g) for value, g in groups.items()}
    return out


def category_mean(rows_by_config: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Unweighted mean over configs of all-clip accuracy (the headline), with both standard errors.

    The binomial SE assumes independent configs: sqrt(Σ se_c²)/k. The clustered SE clusters rows of the
    same source clip *across* configs, which also captures the correlation between categories.
    """
    k = len(rows_by_config)
    if k == 0:
        return {"n_configs": 0, "accuracy": None}
    accs, ses, y, w, mu, cl = [], [], [], [], [], []
    for rows in rows_by_config.values():
        n = len(rows)
        c = [float(_correct(r)) for r in rows]
        acc = sum(c) / n if n else float("nan")
        accs.append(acc)
        ses.append(binomial_stderr(int(sum(c)), n))
        y += c
        w += [1.0 / (k * n)] * n
        mu += [acc] * n
        cl += [r.get("source_clip_id") for r in rows]
    mean = sum(accs) / k
    se = math.sqrt(sum(s * s for s in ses)) / k
    se_cl = reportable_cluster_stderr(y, cl, weights=w, means=mu)
    # Wilson at the effective sample size p(1−p)/se² (Kish): one config gives exactly its own Wilson interval,
    # and a mean at 0 or 1 (se = 0) uses the pooled clips, so the interval never collapses to [0, 0].
    n_eff = mean * (1 - mean) / (se * se) if se > 0 else float(len(y))
    lo, hi = wilson_interval(mean, n_eff)
    return finite_or_none({
        "n_configs": k,
        "configs": list(rows_by_config),
        "accuracy": mean,
        "accuracy_stderr": se,
        "accuracy_ci_low": lo,
        "accuracy_ci_high": hi,
        "n_clusters": n_clusters(cl),
        "accuracy_cluster_stderr": se_cl,
    })


@dataclass(frozen=True)
class McNemarResult:
    """Paired comparison of two runs on the same clips."""

    n_pairs: int
    accuracy_a: float
    accuracy_b: float
    only_a_correct: int  # b in the usual notation
    only_b_correct: int  # c
    p_value: float
    n_only_in_a: int = 0
    n_only_in_b: int = 0



def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts."""
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(int(b), int(b + c), 0.5).pvalue)


def mcnemar(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]]) -> McNemarResult:
    """McNemar test pairing rows by benchmark_clip_id (unparsed = wrong); needs a common clip."""
    a = {r["benchmark_clip_id"]: _correct(r) for r in rows_a}
    b = {r["benchmark_clip_id"]: _correct(r) for r in rows_b}
    common = [cid for cid in a if cid in b]
    if not common:
        raise ValueError("the two runs share no clip id; McNemar needs paired rows")
    only_a = sum(a[c] and not b[c] for c in common)
    only_b = sum(b[c] and not a[c] for c in common)
    return McNemarResult(
        n_pairs=len(common),
        accuracy_a=sum(a[c] for c in common) / len(common),
        accuracy_b=sum(b[c] for c in common) / len(common),
        only_a_correct=only_a,
        only_b_correct=only_b,
        p_value=mcnemar_exact(only_a, only_b),
        n_only_in_a=len(a) - len(common),
        n_only_in_b=len(b) - len(common),
    )


# ---- multiple-choice tasks with an adversarial label (VoxParadox) ----------------------------------------
MCQ_METRICS: tuple[str, ...] = ("acc", "ala", "ala_gap")  # GT accuracy, adversarial-label agreement, ALA - GT


def _share(hits: Sequence[bool]) -> dict[str, float]:
    """A share with its binomial SE and Wilson 95 % interval."""
    k, n = sum(hits), len(hits)
    lo, hi = binomial_interval(k, n) if n else (float("nan"), float("nan"))
    return {"": k / n if n else float("nan"), "_stderr": binomial_stderr(k, n), "_ci_low": lo, "_ci_high": hi}


def _paired_gap(first: Sequence[bool], second: Sequence[bool]) -> dict[str, float]:
    """Mean of per-item differences first − second (ALA hit − GT hit, each −1, 0 or 1), its SE (sample variance
    / n), and Newcombe's hybrid score interval for a paired difference (1998, method 10): inside [−1, 1] and
    sane for few items, where ±1.96 SE reached ±113 %."""
    n = len(first)
    if n == 0:
        return {"": float("nan"), "_stderr": float("nan"), "_ci_low": float("nan"), "_ci_high": float("nan")}
    d = [float(a) - float(b) for a, b in zip(first, second, strict=True)]
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n) if n > 1 else float("nan")
    lo, hi = newcombe_paired_interval(first, second)
    return {"": mean, "_stderr": se, "_ci_low": lo, "_ci_high": hi}


def newcombe_paired_interval(first: Sequence[bool], second: Sequence[bool], z: float = Z95) -> tuple[float, float]:
    """Newcombe's (1998, method 10) square-and-add interval for p1 − p2 of paired binary outcomes: the Wilson
    intervals of both shares combined with the table's phi correlation (continuity-corrected; 0 when a margin
    is empty), as Fagerland, Lydersen & Laake's contingencytables computes it."""
    n = len(first)
    a = sum(1 for x, y in zip(first, second, strict=True) if x and y)
    b = sum(1 for x, y in zip(first, second, strict=True) if x and not y)
    c = sum(1 for x, y in zip(first, second, strict=True) if y and not x)
    d = n - a - b - c
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(p1, n, z)
    l2, u2 = wilson_interval(p2, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c  # Newcombe's phi: a positive cross product less n/2 (continuity), 0 if that is < 0
    cross = cross - n / 2 if cross > n / 2 else min(cross, 0)
    phi = cross / math.sqrt(margins) if margins else 0.0
    low = (p1 - p2) - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = (p1 - p2) + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return (max(-1.0, low), min(1.0, high))


def mcq_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """summarize() plus acc (GT), ala (answers equal to the adversarial label) and ala_gap = ala − acc, each with
    SE and 95 % interval; ALA and its gap over the rows that have an adversarial label."""
    correct = [_correct(r) for r in rows]
    adv_rows = [(r, c) for r, c in zip(rows, correct, strict=True) if r.get("adversarial") is not None]
    ala = [_pred(r) is not None and _pred(r) in (r.get("adversarial_labels") or [r["adversarial"]])
           for r, _ in adv_rows]  # a set of adversarial labels: an answer equal to any of them
    gap = _paired_gap(ala, [c for _, c in adv_rows])
    out = dict(summarize(rows))
    for name, parts in (("acc", _share(correct)), ("ala", _share(ala)), ("ala_gap", gap)):
        out.update({f"{name}{suffix}": value for suffix, value in parts.items()})
    out["n_adversarial"] = len(adv_rows)
    out = finite_or_none(out)
    by_group = mcq_groups(rows)
    return {**out, "by_group": by_group} if by_group else out


def mcq_groups(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """acc, ala and ala_gap per value of each group column the rows carry (`groups`: MMSU's category,
    sub-category, ...), values in first-seen order; {} for rows without groups."""
    by: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for r in rows:
        for column, value in (r.get("groups") or {}).items():
            by.setdefault(str(column), {}).setdefault(str(value), []).append(r)
    keep = ("n", "acc", "acc_ci_low", "acc_ci_high", "ala", "ala_ci_low", "ala_ci_high", "ala_gap", "n_adversarial")
    return {column: {value: {k: v for k, v in mcq_summary([{**r, "groups": None} for r in members]).items()
                             if k in keep} for value, members in values.items()} for column, values in by.items()}


def single_task_interval(summaries: Sequence[Mapping[str, Any]], names: Iterable[str]) -> dict[str, Any]:
    """A macro mean over one task is that task: its own interval (Wilson, Newcombe, bootstrap), not ±1.96 SE."""
    if len(summaries) != 1:
        return {}
    only = summaries[0]
    return {f"{name}{suffix}": only.get(f"{name}{suffix}", float("nan")) for name in names
            for suffix in ("_ci_low", "_ci_high")}


def independent_mean(summaries: Sequence[Mapping[str, Any]], name: str, z: float = Z95,
                     missing_se: float | None = None) -> dict[str, float]:
    """The unweighted mean of `name` over the tasks that have it, SE sqrt(Σ se²)/k (independent tasks) and
    mean ± z·SE; a task without `<name>_stderr` counts as `missing_se` (None: the mean's SE is unknown, NaN)."""
    kept = [s for s in summaries if s.get(name) is not None]
    ses = [s[f"{name}_stderr"] if s.get(f"{name}_stderr") is not None else missing_se for s in kept]
    mean = sum(s[name] for s in kept) / len(kept) if kept else float("nan")
    se = math.sqrt(sum(x * x for x in ses)) / len(ses) if ses and None not in ses else float("nan")  # type: ignore[operator]
    return {name: mean, f"{name}_stderr": se, f"{name}_ci_low": mean - z * se, f"{name}_ci_high": mean + z * se}


def mcq_macro(rows_by_config: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Unweighted mean over MCQ configs of acc, ala and ala_gap; SE sqrt(Σ se²)/k (independent tasks), ±1.96 SE."""
    summaries = [mcq_summary(rows) for rows in rows_by_config.values()]
    k = len(summaries)
    out: dict[str, Any] = {"n_configs": k, "configs": list(rows_by_config), "complete": True}
    for name in MCQ_METRICS:
        out.update(independent_mean(summaries, name))
    out.update(single_task_interval(summaries, MCQ_METRICS))
    out.update(accuracy=out["acc"], accuracy_stderr=out["acc_stderr"], accuracy_ci_low=out["acc_ci_low"],
               accuracy_ci_high=out["acc_ci_high"])
    by_group = mcq_groups([r for rows in rows_by_config.values() for r in rows])  # pooled over the tasks
    return {**finite_or_none(out), **({"by_group": by_group} if by_group else {})}
# ---- lexical conflict: the carrier's words claim a direction (claims source) -----------------------------
CONFLICT_METRICS: dict[str, bool | None] = {  # lm-eval "<metric>,none" keys -> higher is better
    "acc_congruent": True, "acc_incongruent": True, "acc_neutral": True, "claim_following": None, "claim_gap": None,
}


def _proportion(name: str, hits: Sequence[bool]) -> dict[str, float]:
    """`name` as the share of hits, with its binomial SE and Wilson 95 % interval (NaN when there are none)."""
    k, n = int(sum(hits)), len(hits)
    lo, hi = binomial_interval(k, n)
    return {name: k / n if n else float("nan"), f"{name}_stderr": binomial_stderr(k, n),
            f"{name}_ci_low": lo, f"{name}_ci_high": hi, f"{name}_n": n}


def _paired_difference(name: str, diffs: Sequence[float]) -> dict[str, float]:
    """Mean of per-row differences with the SE of a mean (sample variance / n) and ±1.96 SE."""
    n = len(diffs)
    mean = sum(diffs) / n if n else float("nan")
    se = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (n - 1) / n) if n > 1 else float("nan")
    return {name: mean, f"{name}_stderr": se, f"{name}_ci_low": mean - Z95 * se, f"{name}_ci_high": mean + Z95 * se,
            f"{name}_n": n}


def _claim_follows(rows: Sequence[Mapping[str, Any]]) -> list[bool]:
    """Per incongruent row: was the answer the words' claim?"""
    return [_pred(r) is not None and _pred(r) == r.get("claim") for r in rows if r.get("congruent") is False]


def conflict_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Accuracy on congruent, incongruent and neutral rows; claim-following CF = share of incongruent rows
    answered with the claim (VoxParadox's ALA); claim_gap = CF − accuracy(incongruent), the mean of the
    per-row difference [answer = claim] − [answer = truth] with its paired SE. Unparsed rows count as neither."""
    cong = [r for r in rows if r.get("congruent") is True]
    incong = [r for r in rows if r.get("congruent") is False]
    neutral = [r for r in rows if r.get("claim") in (None, "none")]
    follows = _claim_follows(incong)
    right = [_correct(r) for r in incong]
    return {
        **_proportion("acc_congruent", [_correct(r) for r in cong]),
        **_proportion("acc_incongruent", right),
        **_proportion("acc_neutral", [_correct(r) for r in neutral]),
        **_proportion("claim_following", follows),
        "claim_following_p": score_test_p(sum(follows), len(follows)),  # against 0.5, unadjusted
        **_paired_difference("claim_gap", [float(f) - float(c) for f, c in zip(follows, right, strict=True)]),
    }


def conflict_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """summarize() plus the lexical-conflict metrics (undefined values None)."""
    return finite_or_none({**summarize(rows), **conflict_metrics(rows)})


def conflict_macro(rows_by_config: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """The conflict metrics over every conflict config's rows pooled (each config has the same design), plus the
    unweighted accuracy mean and each config's claim-following tested against 0.5 jointly (chance_tests); the
    overall entry of results.json's `conflict` group."""
    from vocalgrad_dataset.categories import CATEGORY_NAMES

    pooled = [r for rows in rows_by_config.values() for r in rows]
    cats = {str(r.get("category", c)).split("-")[0] for c, rows in rows_by_config.items() for r in rows[:1]}
    counts = {c: (sum(f), len(f)) for c, rows in rows_by_config.items() for f in [_claim_follows(rows)]}
    return {**finite_or_none({**category_mean(rows_by_config), **conflict_metrics(pooled),
                              "complete": set(CATEGORY_NAMES) <= cats}),  # all nine categories' conflict configs
            # is CF at chance on each config, the configs' claims made jointly (family-wise 95 %)?
            "claim_following_vs_chance": chance_tests(counts)}
