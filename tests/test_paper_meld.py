"""Table 22 (MELD transfer): vocalgrad-paper --tables-only over a base and an adapter run of the classify kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sklearn.metrics import f1_score

from tests.helpers.meld import build_meld_shaped

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
        harness_main(["eval", "--model", "random", "--seed", str(seed), "--dataset", str(folder), "--kind",
                      "classify", "--mode", "choices", "--out", str(out / "runs" / name), "--no-preflight"])
    (tmp_path / "suite.yaml").write_text(SUITE)
    paper_main(["--model", "random", "--out", str(out), "--suite", str(tmp_path / "suite.yaml"), "--tables-only"])
    text = (out / "tables" / "table22_meld_transfer.md").read_text()
    assert text.startswith("# Table 22: Transfer to emotion recognition (MELD)")
    lines = {ln.split(" | ")[0].lstrip("| "): ln.strip("| ").split(" | ") for ln in text.splitlines()
             if (ln.startswith("| base") or ln.startswith("| volume adapter")) and ln.count(" | ") > 20}
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


def test_the_default_suite_reads_meld_runs_paired_by_id_and_never_runs_them(tmp_path: Path) -> None:
    """Table 22 is in the paper's suite: its external runs come from `harness eval`, vocalgrad-paper never runs
    them (status "external"), and the adapter is paired with the base by utterance id, not by file position
    (a multi-process run writes its samples in another order)."""
    from harness.cli import main as harness_main
    from harness.paper.cli import main as paper_main

    folder = build_meld_shaped(tmp_path)
    out = tmp_path / "suite"
    for seed, name in ((1, "meld-base"), (2, "meld-volume"), (3, "meld-pitch")):
        harness_main(["eval", "--model", "random", "--seed", str(seed), "--dataset", str(folder), "--kind",
                      "classify", "--mode", "choices", "--out", str(out / "runs" / name), "--no-preflight"])
    vol_file = out / "runs" / "meld-volume" / "samples_meld.jsonl"
    vol_file.write_text("\n".join(reversed(vol_file.read_text().splitlines())) + "\n")  # another order
    before = vol_file.read_text()
    # 1: the other tables have no runs here (INCOMPLETE); Table 22 is complete
    assert paper_main(["--model", "random", "--out", str(out), "--only", "meld"]) == 1
    assert vol_file.read_text() == before  # not re-run
    plan = {r["run"]: r for r in json.loads((out / "suite.json").read_text())["runs"]}
    assert plan["meld-base"]["status"] == plan["meld-volume"]["status"] == plan["meld-pitch"]["status"] == "external"
    text = (out / "tables" / "table22_meld_transfer.md").read_text()
    assert "INCOMPLETE" not in text and "Skipped" not in text
    base = {r["benchmark_clip_id"]: r for r in _samples(out / "runs" / "meld-base")}
    vol = {r["benchmark_clip_id"]: r for r in _samples(out / "runs" / "meld-volume")}
    assert set(base) == set(vol)
    only_base = sum(base[i]["pred"] == base[i]["gold"] and vol[i]["pred"] != vol[i]["gold"] for i in base)
    only_vol = sum(vol[i]["pred"] == vol[i]["gold"] and base[i]["pred"] != base[i]["gold"] for i in base)
    assert only_base + only_vol > 0
    assert "| volume adapter vs base | " in text and f"| {only_base} / {only_vol} |" in text
    assert "| pitch adapter vs base | " in text  # the paper's two adapters, both against the base
    assert "| 22 | [table22_meld_transfer.md](table22_meld_transfer.md) | complete |" in (
        out / "tables" / "README.md").read_text()


def test_a_run_with_opt_ins_is_flagged_in_its_tables(tmp_path: Path) -> None:
    """Issue 37: results.json model_info "not_paper_protocol" of a run puts a ‡ line on every table reading it."""
    from harness.cli import main as harness_main
    from harness.paper.cli import main as paper_main

    folder = build_meld_shaped(tmp_path, {"joy": 3, "neutral": 3})
    out = tmp_path / "suite"
    for seed, name in ((1, "meld-base"), (2, "meld-volume")):
        harness_main(["eval", "--model", "random", "--seed", str(seed), "--dataset", str(folder), "--kind",
                      "classify", "--mode", "choices", "--out", str(out / "runs" / name), "--no-preflight"])
    res_file = out / "runs" / "meld-volume" / "results.json"
    res = json.loads(res_file.read_text())
    res["model_info"] = {**(res.get("model_info") or {}), "not_paper_protocol": ["dtype bfloat16 (the paper: float32)",
                                                                                "tf32"]}
    res_file.write_text(json.dumps(res))
    (tmp_path / "suite.yaml").write_text(SUITE)
    paper_main(["--model", "random", "--out", str(out), "--suite", str(tmp_path / "suite.yaml"), "--tables-only"])
    text = (out / "tables" / "table22_meld_transfer.md").read_text()
    assert text.count("not the paper's protocol") == 1
    assert "_‡ not the paper's protocol: meld-volume: dtype bfloat16 (the paper: float32); tf32._" in text
