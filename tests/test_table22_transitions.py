"""Table 22's macro precision and recall, prediction transitions and published values, checked against
scikit-learn and counts made here from the runs' samples (MELD-shaped fixture, seeded random answers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sklearn.metrics import precision_score, recall_score

from harness.paper.transitions import transitions
from tests.helpers.meld import build_meld_shaped

RUNS = (("meld-base", 1, "base"), ("meld-volume", 2, "volume adapter"), ("meld-pitch", 3, "pitch adapter"))


def _samples(run: Path) -> dict[str, dict]:
    rows = [json.loads(line) for line in (run / "samples_meld.jsonl").read_text().splitlines()]
    return {r["benchmark_clip_id"]: r for r in rows}


@pytest.fixture(scope="module")
def table22(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    from harness.cli import main as harness_main
    from harness.paper.cli import main as paper_main

    tmp = tmp_path_factory.mktemp("t22")
    folder = build_meld_shaped(tmp)
    out = tmp / "suite"
    for name, seed, _ in RUNS:
        harness_main(["eval", "--model", "random", "--seed", str(seed), "--dataset", str(folder), "--kind",
                      "classify", "--mode", "choices", "--out", str(out / "runs" / name), "--no-preflight"])
    paper_main(["--model", "random", "--out", str(out), "--only", "meld"])
    return out, (out / "tables" / "table22_meld_transfer.md").read_text()


def test_table22_prints_macro_precision_and_recall(table22: tuple[Path, str]) -> None:
    out, text = table22
    rows = {ln.strip("| ").split(" | ")[0]: ln.strip("| ").split(" | ") for ln in text.splitlines()
            if ln.startswith("| ") and ln.count(" | ") > 20}  # the per-class table's rows
    for name, _, label in RUNS:
        samples = list(_samples(out / "runs" / name).values())
        gold, pred = [r["gold"] for r in samples], [r["pred"] or "none" for r in samples]
        labels = samples[0]["options"]
        p = 100 * precision_score(gold, pred, labels=labels, average="macro", zero_division=0)
        r = 100 * recall_score(gold, pred, labels=labels, average="macro", zero_division=0)
        row = rows[label]
        assert row[-4:-2] == [f"{p:.1f}", f"{r:.1f}"]  # macro-P, macro-R, then macro-F1 and accuracy


def test_table22_prints_the_published_macro_f1_beside_ours(table22: tuple[Path, str]) -> None:
    _, text = table22
    assert "macro-F1 (published, kimi-audio)" in text
    for label, published in (("base", "41.3"), ("volume adapter", "37.7"), ("pitch adapter", "34.2")):
        assert any(ln.startswith(f"| {label} | ") and ln.endswith(f" | {published} |") for ln in text.splitlines())


def test_table22_transition_statistic_is_the_share_of_base_predictions_that_change(table22: tuple[Path, str]) -> None:
    out, text = table22
    base = _samples(out / "runs" / "meld-base")
    for name, _, label in RUNS[1:]:
        tuned = _samples(out / "runs" / name)
        neutral = [i for i, r in base.items() if r["pred"] == "neutral"]
        to_joy = sum(tuned[i]["pred"] == "joy" for i in neutral)
        assert neutral, "the fixture's random base must predict neutral somewhere"
        share = f"{100 * to_joy / len(neutral):.1f} % ({to_joy} of {len(neutral)})"
        published = " (published: 25.8 %)" if name == "meld-pitch" else ""
        assert f"Neutral -> Joy, {label}: {share} of the base's neutral predictions{published}" in text
        # the matrix row of the base's neutral predictions sums to 100 % over the tuned predictions
        row = next(ln for ln in text.split(f"#### {label} (from base)")[1].splitlines()
                   if ln.startswith(f"| neutral (n={len(neutral)}) |"))
        assert sum(float(c) for c in row.strip("| ").split(" | ")[1:]) == pytest.approx(100.0, abs=0.3)


def test_transitions_count_by_hand() -> None:
    labels = ["joy", "neutral"]
    base = ["neutral", "neutral", "joy", None, "neutral"]
    tuned = ["joy", "neutral", "joy", "joy", None]
    table = transitions(base, tuned, labels)
    assert table["neutral"] == {"joy": (1, 3), "neutral": (1, 3), "unparsed": (1, 3)}
    assert table["unparsed"]["joy"] == (1, 1) and table["joy"]["joy"] == (1, 1)
