"""`vocalgrad-paper`: the dry run lists the suite and writes every table; tables come from samples files only,
with the published values beside, and never from another prompt variant's files (SPEC §8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.data import CONFIGS
from harness.paper.cli import main
from harness.paper.reference import reference_index
from harness.paper.run import assemble_tables
from harness.paper.suite import default_suite, suite_runs
from harness.results import write_jsonl

MODEL = "tiny-qwen2-audio"
TABLES = default_suite().tables


def test_dry_run_lists_runs_and_writes_every_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model", MODEL, "--out", str(tmp_path), "--dry-run"]) == 0
    assert "queries" in capsys.readouterr().out
    files = {p.name for p in (tmp_path / "tables").iterdir()}
    assert {t.filename for t in TABLES} | {"README.md"} == files
    assert {t.key for t in TABLES} == {"2", "3", *map(str, range(4, 18)), "22", "figure8", "figure4"}
    table22 = (tmp_path / "tables" / "table22_meld_transfer.md").read_text()
    assert "_Skipped: no samples in runs/meld-base, runs/meld-volume, runs/meld-pitch;" in table22 and "INCOMPLETE" not in table22
    table4 = (tmp_path / "tables" / "table04_finetune_in_domain.md").read_text()  # adapters' runs: external too
    assert "_Skipped: no samples in runs/finetune-speed, " in table4 and "vocalgrad-finetune --model" in table4
    plan = {r["run"]: r for r in json.loads((tmp_path / "suite.json").read_text())["runs"]}
    assert plan["main"]["queries"] == 21600 and plan["beep"]["queries"] == 960 and plan["beep"]["prompt"] == "audio_ref"
    assert plan["ternary"]["queries"] == 22500 and plan["source-bias"]["queries"] == 900
    assert plan["few-shot+audio_ref"]["audios_per_query"] == 5 and plan["loquacious"]["queries"] == 21600
    assert sum(r["queries"] for r in plan.values() if r["run"].startswith("cross-attribute:")) == 81 * 2400
    table3 = (tmp_path / "tables" / "table03_beep_ablation.md").read_text()
    assert "Dry run" in table3 and "| Kimi-Audio | 52.0 | 50.4 | 57.5 | 50.0 | 50.0 |" in table3
    table2 = (tmp_path / "tables" / "table02_main_accuracy.md").read_text()
    assert "| Human | 94.4 | 95.3 |" in table2 and f"**{MODEL} (this run)** | — |" in table2


def test_run_selection_and_reference_index() -> None:
    assert [r.name for r in default_suite().select(["formats"])] == ["yesno", "ternary"]
    assert "main" not in {r.name for r in default_suite().select(skip=["main"])}
    with pytest.raises(ValueError, match="unknown run or group"):
        default_suite().select(["mian"])
    ref = reference_index()
    assert ref[("main", "volume", "kimi-audio")]["accuracy"] == pytest.approx(0.5054166666666666)
    assert ("paraphrase-1", "volume", "kimi-audio") in ref and ("cross-attribute:pitch", "echo", "mimo-audio") in ref
    assert ref[("beep", "pitch", "gemini-3-flash")]["n"] == 240
    assert len({r.name for r in suite_runs()}) == len(suite_runs())


def _write_run(out: Path, run: str, prompt: str, config: str, outcomes: list[tuple[str, str, str]], model: str = MODEL) -> None:
    """A samples file of (gold, raw answer, direction) rows, as the runner writes them."""
    parser = "ternary-unique-answer-v1" if config.endswith("-ternary") else (
        "yesno-unique-answer-v1" if config.endswith("-yesno") else "main-unique-direction-v1")
    rows = [{"benchmark_clip_id": f"{config}-{i}", "category": config, "gold": g, "pred": None, "raw": raw, "parsed": False,
             "prompt_variant": prompt, "parser": parser, "answer_words": ["increase", "decrease"], "tier": "low",
             "curve": "linear", "direction": d, "source_clip_id": f"s{i % 4}", "error": None, "model": model,
             "mode": "generate"} for i, (g, raw, d) in enumerate(outcomes)]
    write_jsonl(out / "runs" / run.replace(":", "-") / f"samples_{config}.jsonl", rows)


def test_tables_from_samples_files_and_no_fallback(tmp_path: Path) -> None:
    for c in CONFIGS:  # 3 of 4 right on every category: 75.0
        _write_run(tmp_path, "main", "default", c, [("increase", "increase", "up"), ("increase", "increase", "up"),
                                                    ("decrease", "decrease", "down"), ("decrease", "increase", "down")])
        _write_run(tmp_path, "ternary", "default", f"{c}-ternary",
                   [("increase", "increase", "up"), ("decrease", "constant", "down"), ("constant", "constant", "none")])
    status = assemble_tables(tmp_path, MODEL)
    table2 = (tmp_path / "tables" / "table02_main_accuracy.md").read_text()
    assert f"| **{MODEL} (this run)** | 75.0 | " + " | ".join(["75.0"] * 9) + " |" in table2
    assert status["2"] is None and status["9"] is None and status["3"] is not None  # beep run absent: incomplete
    assert "INCOMPLETE: missing samples: runs/beep (4 configs)" in (tmp_path / "tables" / "table03_beep_ablation.md").read_text()
    # ternary macro-F1: increase 1, decrease 0, constant 2/3 -> 55.6 on every category
    assert "| ternary (increase/decrease/constant) | 55.6 |" in (tmp_path / "tables" / "table16_format_macro_f1.md").read_text()
    assert "| constant | 0.0 | 100.0 | 100.0 |" in (tmp_path / "tables" / "table17_prediction_distribution.md").read_text()
    # an audio_ref run directory holding default-prompt answers is refused, not used (SPEC §8)
    _write_run(tmp_path, "audio_ref", "default", "pitch", [("increase", "increase", "up")])
    status = assemble_tables(tmp_path, MODEL)
    assert "needs prompt 'audio_ref'" in status["11"]
    assert "needs prompt 'audio_ref'" in (tmp_path / "tables" / "table11_prompt_variants.md").read_text()
    assert main(["--model", MODEL, "--out", str(tmp_path), "--tables-only"]) == 1


def test_suite_runs_and_resumes_on_the_demo_source(tmp_path: Path) -> None:
    args = ["--model", "always-increase", "--out", str(tmp_path), "--source", "demo", "--limit", "2",
            "--only", "main,beep,source-bias,few-shot", "--batch-size", "4"]
    assert main(args) == 1  # the runs not selected leave their tables incomplete
    runs = {r["run"]: r for r in json.loads((tmp_path / "suite.json").read_text())["runs"]}
    assert {r["status"] for r in runs.values()} == {"done"} and runs["beep"]["queries"] == 8
    table3 = (tmp_path / "tables" / "table03_beep_ablation.md").read_text()
    assert "INCOMPLETE" not in table3 and "| **always-increase (this run)** | 50.0 |" in table3
    assert "INCOMPLETE" not in (tmp_path / "tables" / "table14_few_shot.md").read_text()
    few = (tmp_path / "runs" / "few-shot+audio_ref" / "samples_echo.jsonl").read_text()
    # each of the two rows' prompts holds the fourth example once (lm-eval's arguments.gen_args_0.arg_0 repeats it)
    prompts = [json.loads(line)["prompt"] for line in few.splitlines()]
    assert sum(p.count("Example 4 label:") for p in prompts) == 2 and '"prompt_variant": "few-shot+audio_ref"' in few
    assert main(args) == 1  # a rerun resumes: nothing left to evaluate, the samples stay byte for byte
    assert (tmp_path / "runs" / "few-shot+audio_ref" / "samples_echo.jsonl").read_text() == few
