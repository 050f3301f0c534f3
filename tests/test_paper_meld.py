"""Table 22 (MELD transfer): vocalgrad-paper --tables-only over a base and an adapter run of the classify kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sklearn.metrics import f1_score

from tests.meld_fixture import build_meld_shaped

SUITE = """runs:
  - {name: meld-base, prompt: default, configs: [meld], group: meld}
  - {name: meld-volume, prompt: default, configs: [meld], group: meld}
tables:
  - key: "22"
    filename: table22_meld_transfer.md
    title: "Transfer to emotion recognition (MELD)"
    kind: meld-transfer
    runs: [meld]
    labels: {meld-base: base, meld-volume: volume adapter}
"""


def _samples(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "samples_meld.jsonl").read_text().splitlines()]


def test_table22_has_per_class_f1_macro_f1_and_paired_tests(tmp_path: Path) -> None:
    from harness.cli import main as harness_main
    from harness.paper.cli import main as paper_main

    folder = build_meld_shaped(tmp_path)
    out = tmp_path / "suite"
    for seed, name in ((1, "meld-base"), (2, "meld-volume")):
        harness_main(["eval", "--model", "random", "--seed", str(seed), "--dataset", str(folder), "--task-kind",
                      "classify", "--mode", "choices", "--out", str(out / "runs" / name), "--no-preflight"])
    (tmp_path / "suite.yaml").write_text(SUITE)
    paper_main(["--model", "random", "--out", str(out), "--suite", str(tmp_path / "suite.yaml"), "--tables-only"])
    text = (out / "tables" / "table22_meld_transfer.md").read_text()
    assert text.startswith("# Table 22: Transfer to emotion recognition (MELD)")
    lines = {ln.split(" | ")[0].lstrip("| "): ln.strip("| ").split(" | ") for ln in text.splitlines()
             if ln.startswith("| base") or ln.startswith("| volume adapter")}
    for name, run in (("base", "meld-base"), ("volume adapter", "meld-volume")):
        rows = _samples(out / "runs" / run)
        gold, pred = [r["gold"] for r in rows], [r["pred"] for r in rows]
        labels = rows[0]["options"]
        want = 100 * f1_score(gold, pred, labels=labels, average="macro", zero_division=0)
        assert lines[name][-2].startswith(f"{want:.1f} [")  # macro-F1 column, scikit-learn's value
        neutral = 100 * f1_score(gold, pred, labels=["neutral"], average="macro", zero_division=0)
        assert lines[name][1 + 3 * labels.index("neutral") + 2] == f"{neutral:.1f}"
    base, vol = _samples(out / "runs" / "meld-base"), _samples(out / "runs" / "meld-volume")
    only_base = sum(b["pred"] == b["gold"] and v["pred"] != v["gold"] for b, v in zip(base, vol, strict=True))
    only_vol = sum(v["pred"] == v["gold"] and b["pred"] != b["gold"] for b, v in zip(base, vol, strict=True))
    assert "| volume adapter vs base | " in text and f"| {only_base} / {only_vol} |" in text


def test_paired_bootstrap_of_identical_runs_is_no_difference() -> None:
    from harness.paper.tables import paired_macro_f1_test

    gold = ["joy", "neutral", "joy", "anger"] * 5
    pred = ["joy", "joy", "neutral", "anger"] * 5
    diff, p = paired_macro_f1_test(gold, pred, pred, ["anger", "joy", "neutral"])
    assert diff == 0.0 and p == pytest.approx(1.0)
