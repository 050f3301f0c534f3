"""Metrics against hand-computed values."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.metrics import (
    binomial_interval,
    breakdowns,
    category_mean,
    chance_tests,
    cluster_stderr,
    mcnemar,
    mcnemar_exact,
    score_test_p,
    summarize,
    too_few_clusters,
)
from harness.reference import HUMAN_TABLE2, reference, table2

ROOT = Path(__file__).resolve().parents[1]

# (gold, pred, raw, error, cluster, tier)
TABLE = [
    ("increase", "increase", "increase", None, "A", "low"),
    ("increase", "increase", "The volume increases.", None, "A", "mid"),
    ("increase", "decrease", "decrease", None, "B", "low"),
    ("increase", None, "increase or decrease", None, "B", "mid"),
    ("decrease", "decrease", "Decrease.", None, "C", "low"),
    ("decrease", "increase", "increase", None, "C", "mid"),
    ("decrease", None, None, "RuntimeError: boom", "D", "low"),
    ("decrease", "decrease", "decrease", None, "D", "mid"),
    ("decrease", "decrease", "decrease", None, "D", "high"),
]


def _rows(table=TABLE, prefix: str = "x") -> list[dict]:
    return [
        {"benchmark_clip_id": f"{prefix}{i}", "gold": g, "pred": p, "raw": r, "error": e, "source_clip_id": c,
         "tier": t, "parser": "main-unique-direction-v1", "answer_words": ["increase", "decrease"]}
        for i, (g, p, r, e, c, t) in enumerate(table)
    ]


def test_summary_hand_computed() -> None:
    s = summarize(_rows())
    assert (s["n"], s["n_correct"], s["n_parsed"], s["n_unparsed"]) == (9, 5, 7, 2)
    assert (s["n_ambiguous"], s["n_error"]) == (1, 1)
    assert s["accuracy"] == pytest.approx(5 / 9)
    assert s["parsed_accuracy"] == pytest.approx(5 / 7)
    assert s["balanced_accuracy"] == pytest.approx((2 / 4 + 3 / 5) / 2)  # 0.55
    assert s["increase_ratio"] == pytest.approx(3 / 7)
    assert s["increase_ratio_all"] == pytest.approx(3 / 9)
    assert s["exact_match_rate"] == pytest.approx(6 / 9)  # rows 0, 2, 4, 5, 7, 8
    assert s["exact_match_accuracy"] == pytest.approx(4 / 9)  # exact and right: 0, 4, 7, 8
    se = math.sqrt(20 / 729)  # sqrt(p(1-p)/n) with p = 5/9, n = 9
    assert s["accuracy_stderr"] == pytest.approx(se)
    # Wilson score interval by hand: (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)
    z, n, p = 1.959964, 9, 5 / 9
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert s["accuracy_ci_low"] == pytest.approx((centre - half) / (1 + z * z / n), abs=1e-6)
    assert s["accuracy_ci_high"] == pytest.approx((centre + half) / (1 + z * z / n), abs=1e-6)
    # residual sums per cluster /9: A 8/81, B -10/81, C -1/81, D 3/81; CR1 factor G/(G-1) = 4/3
    rows = _rows()
    assert cluster_stderr([float(r["pred"] == r["gold"] and not r["error"]) for r in rows],
                          [r["source_clip_id"] for r in rows]) == pytest.approx(math.sqrt(232) / 81)
    # ...but 4 clusters are too few to report it (Cameron & Miller 2015; the floor is 10)
    assert s["n_clusters"] == 4 and s["accuracy_cluster_stderr"] is None and s["accuracy_cluster_ci_low"] is None


def test_clustered_interval_only_from_ten_clusters() -> None:
    """Issue 23: 3 source clips gave a "clustered CI" of ±2.7 next to a Wilson [37.4, 59.9]."""
    def rows(g: int) -> list[dict]:
        # cluster k: two rows, right on both for even k, wrong on both for odd k
        return [{"gold": "increase", "pred": "increase" if k % 2 == 0 else "decrease", "raw": "x", "error": None,
                 "source_clip_id": f"c{k}", "parser": "main", "tier": "low"} for k in range(g) for _ in range(2)]
    nine, ten = summarize(rows(9)), summarize(rows(10))
    assert nine["n_clusters"] == 9 and nine["accuracy_cluster_stderr"] is None
    # ten clusters, residuals ±1/2 per row, cluster sums ±1/20 (weights 1/20): CR1 = sqrt(10/9 * 10/400)
    assert ten["n_clusters"] == 10 and ten["accuracy_cluster_stderr"] == pytest.approx(math.sqrt(10 / 9 * 10 / 400))
    assert too_few_clusters(nine) == "too few clusters (9 < 10)" and too_few_clusters(ten) is None


def test_error_row_is_wrong_even_if_pred_was_set() -> None:
    rows = _rows([("increase", "increase", "increase", "TimeoutError: x", "A", "low")])
    s = summarize(rows)
    assert (s["n_correct"], s["n_parsed"], s["n_error"], s["exact_match_rate"]) == (0, 0, 1, 0)


def test_score_test_is_the_one_the_wilson_interval_inverts() -> None:
    """53 of 84 (the README's random roughness CF): z = 11 / sqrt(21); 0.5 is in a config's Wilson interval at
    confidence c exactly when p >= 1 − c, checked against scipy's own Wilson interval at every k."""
    from scipy.stats import binomtest, norm

    assert score_test_p(53, 84) == pytest.approx(2 * norm.sf(11 / math.sqrt(21)), rel=1e-12)
    assert score_test_p(42, 84) == 1.0 and math.isnan(score_test_p(0, 0))
    assert score_test_p(3, 10, p0=0.2) == pytest.approx(2 * norm.sf(1 / math.sqrt(1.6)), rel=1e-12)
    for n in (7, 84, 96):
        for k in range(n + 1):
            for confidence in (0.95, 1 - 0.05 / 9):
                ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
                assert (ci.low <= 0.5 <= ci.high) == (score_test_p(k, n) >= 1 - confidence), (k, n, confidence)


def test_chance_tests_hold_the_family_at_95_percent() -> None:
    """Alone, 53 / 84 is above chance (its own 95 % interval misses 0.5); as one of nine configs it is not:
    Bonferroni p x 9 and the Wilson interval at 1 − 0.05/9, which contains 0.5."""
    from scipy.stats import binomtest

    alone = chance_tests({"roughness": (53, 84)})["roughness"]
    assert alone["vs_chance"] == "above" and alone["p_adjusted"] == alone["p"] < 0.05
    nine = chance_tests({"roughness": (53, 84), **{f"c{i}": (42, 84) for i in range(7)}, "empty": (0, 0),
                         "oracle": (3, 96)})
    assert "empty" not in nine and len(nine) == 9  # a config with no incongruent row is not tested
    r = nine["roughness"]
    ci = binomtest(53, 84).proportion_ci(confidence_level=1 - 0.05 / 9, method="wilson")
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert r["ci_low"] < 0.5 < r["ci_high"] and r["p_adjusted"] == pytest.approx(9 * r["p"])
    assert r["vs_chance"] == "at chance" and (r["k"], r["n"], r["share"]) == (53, 84, 53 / 84)
    assert nine["oracle"]["vs_chance"] == "below" and nine["c0"]["p_adjusted"] == 1.0


def test_binomial_interval_is_wilson_and_never_collapses() -> None:
    z = 1.959964
    assert binomial_interval(50, 100) == pytest.approx((0.4038, 0.5962), abs=1e-4)  # Wilson, symmetric at 1/2
    lo, hi = binomial_interval(0, 8)  # the normal approximation gives [0, 0] here
    assert lo == 0.0 and hi == pytest.approx(z * z / (8 + z * z), abs=1e-6) and hi > 0.3
    lo, hi = binomial_interval(8, 8)
    assert hi == 1.0 and lo == pytest.approx(8 / (8 + z * z), abs=1e-6)
    assert binomial_interval(0, 8, method="exact")[1] == pytest.approx(1 - 0.025 ** (1 / 8), abs=1e-9)
    assert all(math.isnan(v) for v in binomial_interval(0, 0))


def test_cluster_stderr_singletons_match_binomial_up_to_cr1() -> None:
    y = [1, 0, 1, 1]
    # each row its own cluster: sqrt(n/(n-1)) * sqrt(p(1-p)/n)
    assert cluster_stderr(y, [0, 1, 2, 3]) == pytest.approx(math.sqrt(4 / 3) * math.sqrt(0.75 * 0.25 / 4))
    assert math.isnan(cluster_stderr(y, ["a"] * 4))  # one cluster: undefined
    assert math.isnan(cluster_stderr(y, [None] * 4))  # no clusters given: no clustered SE


def test_no_clusters_no_clustered_se_and_none_not_nan() -> None:
    rows = [{**r, "source_clip_id": None} for r in _rows()]
    s = summarize(rows)
    assert s["accuracy_cluster_stderr"] is None and s["accuracy_cluster_ci_low"] is None
    empty = summarize([])
    assert empty["n"] == 0 and empty["accuracy"] is None and empty["accuracy_ci_low"] is None
    assert json.loads(json.dumps(empty, allow_nan=False))["parsed_accuracy"] is None


def test_breakdowns() -> None:
    b = breakdowns(_rows(), keys=("tier",))["tier"]
    assert list(b) == ["low", "mid", "high"]
    assert (b["low"]["n"], b["low"]["n_correct"]) == (4, 2)  # rows 0, 2, 4, 6
    assert (b["mid"]["n"], b["mid"]["n_correct"]) == (4, 2)  # rows 1, 3, 5, 7
    assert b["high"]["accuracy"] == 1.0


def test_category_mean() -> None:
    x = _rows()
    y = _rows([("increase", "increase", "increase", None, f"k{i}", "low") for i in range(3)]
              + [("decrease", "increase", "increase", None, "k9", "low")], prefix="y")
    m = category_mean({"x": x, "y": y})
    assert m["n_configs"] == 2
    assert m["accuracy"] == pytest.approx((5 / 9 + 3 / 4) / 2)
    assert m["accuracy_stderr"] == pytest.approx(math.sqrt(20 / 729 + 0.75 * 0.25 / 4) / 2)
    single = category_mean({"x": x})
    assert single["accuracy_cluster_stderr"] == pytest.approx(summarize(x)["accuracy_cluster_stderr"])
    # one config: exactly its own Wilson interval; all wrong (0/8): never [0, 0]
    assert (single["accuracy_ci_low"], single["accuracy_ci_high"]) == pytest.approx(binomial_interval(5, 9))
    wrong = _rows([("increase", "decrease", "decrease", None, f"w{i}", "low") for i in range(8)], prefix="w")
    z = 1.959964
    m = category_mean({"w": wrong})
    assert m["accuracy_ci_low"] == 0.0 and m["accuracy_ci_high"] == pytest.approx(z * z / (8 + z * z), abs=1e-6)
    # two configs: Wilson at n_eff = p(1-p)/se² with the mean and the independent-configs SE above
    p, se = (5 / 9 + 3 / 4) / 2, math.sqrt(20 / 729 + 0.75 * 0.25 / 4) / 2
    n = p * (1 - p) / se**2
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert (m["accuracy_ci_low"], m["accuracy_ci_high"]) != (0.0, 0.0)
    two = category_mean({"x": x, "y": y})
    assert two["accuracy_ci_low"] == pytest.approx((centre - half) / (1 + z * z / n), abs=1e-6)
    assert two["accuracy_ci_high"] == pytest.approx((centre + half) / (1 + z * z / n), abs=1e-6)


def test_mcnemar_exact_values() -> None:
    assert mcnemar_exact(1, 5) == pytest.approx(14 / 64)  # 2 * P(X <= 1), X ~ Bin(6, 1/2)
    assert mcnemar_exact(8, 2) == pytest.approx(112 / 1024)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0


def test_mcnemar_pairs_by_clip_id() -> None:
    a = _rows([("increase", "increase", "increase", None, "A", "low")] * 6)
    b = _rows([("increase", "decrease", "decrease", None, "A", "low")]
              + [("increase", "increase", "increase", None, "A", "low")] * 5)
    b[1]["pred"] = None  # b wrong on 0 and 1
    a[5]["pred"] = "decrease"  # a wrong on 5, b right there
    r = mcnemar(a, list(reversed(b)))  # order does not matter
    assert (r.n_pairs, r.only_a_correct, r.only_b_correct) == (6, 2, 1)
    assert r.p_value == pytest.approx(1.0)  # 2 * P(X <= 1 | n=3) = 2 * 4/8
    assert r.accuracy_a == pytest.approx(5 / 6) and r.accuracy_b == pytest.approx(4 / 6)
    with pytest.raises(ValueError, match="share no clip id"):
        mcnemar(a, _rows(prefix="z"))


def test_reference_table2_matches_spec() -> None:
    t = table2()
    assert list(t)[:2] == ["Human", "Gemini 3 Flash"]
    assert round(t["Kimi-Audio"]["avg"], 1) == 51.8
    assert round(t["Kimi-Audio"]["noise"], 1) == 56.5
    assert round(t["Audio Flamingo 3"]["roughness"], 1) == 46.7
    assert round(t["Gemini 3 Flash"]["avg"], 1) == 50.2
    assert round(t["Human"]["avg"], 1) == 94.4 and HUMAN_TABLE2["pitch"] == 84.7
    r = reference("echo", "gemini-3-flash")
    assert r is not None and (r.n_parsed, r.n_unparsed, r.n_correct) == (2399, 1, 1207)


def test_evaluate_metric_loads_offline(tmp_path: Path) -> None:
    preds, refs = [r["raw"] for r in _rows()], [r["gold"] for r in _rows()]
    code = (
        "import evaluate, json;"
        "m = evaluate.load('harness/metric/vocalgrad_accuracy');"
        f"print(json.dumps(m.compute(predictions={preds!r}, references={refs!r})))"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # the error row of TABLE has raw None, so the metric (raw only) sees it as unparsed, not as an error
    assert got["n"] == 9 and got["n_correct"] == 5 and got["n_parsed"] == 7
    assert got["accuracy"] == pytest.approx(5 / 9)
    assert got["exact_match_rate"] == pytest.approx(6 / 9)
    assert got["accuracy_cluster_stderr"] is None  # no source_clip_ids given
