"""Snapshot of everything `vocalgrad-paper` writes for the default suite: the dry run (suite.json, suite.md,
every table with the published values only), a complete synthetic suite, a partial one (a missing run, a
missing config, a run directory of another prompt variant: SPEC §8), and a short real run on the demo source.

The snapshot was captured from the single-module `harness/paper.py` before it became the `harness.paper`
package with the suite declared in YAML; the package reproduces it byte for byte, with one deliberate
change: a run's "tables" (suite.json, suite.md) are now derived from the tables that read it, so the main
run also lists table 13 (whose "main prompt" rows it feeds). Regenerate
deliberately with `VOCALGRAD_UPDATE_SNAPSHOTS=1 pytest tests/test_paper_snapshot.py` and review the diff of
tests/snapshots/paper/.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from harness.paper.cli import main
from harness.paper.run import assemble_tables
from harness.paper.suite import suite_runs
from harness.prompts import get_variant
from harness.results import write_jsonl
from vocalgrad_dataset.grid import CURVES, TIERS

SNAPSHOTS = Path(__file__).parent / "snapshots" / "paper"
MODEL = "tiny-qwen2-audio"
ROWS_PER_CONFIG = 12


def _gold_and_direction(config: str, labels: tuple[str, ...], i: int) -> tuple[str, str]:
    """A gold label and the clip's direction, cycling over the config's classes."""
    if config.endswith("-yesno"):
        return ("no", "none") if i % 4 == 3 else ("yes", "up" if i % 2 else "down")
    if config.endswith("-ternary"):
        return (("increase", "up"), ("decrease", "down"), ("constant", "none"))[i % 3]
    if config.endswith("-source"):
        return ("increase" if i % 2 else "decrease"), "none"
    return ("increase", "up") if i % 2 == 0 else ("decrease", "down")


def _raw(words: tuple[str, ...], labels: tuple[str, ...], gold: str, draw: int) -> str:
    """A deterministic mix of exact, wordy, wrong, ambiguous and unparsed answers."""
    right = words[labels.index(gold)]
    wrong = words[(labels.index(gold) + 1) % len(words)]
    return {0: right, 1: right, 2: right, 3: f"It would {right}.", 4: right.upper(), 5: wrong,
            6: f"{wrong}.", 7: f"{words[0]} or {words[1]}", 8: "I cannot tell", 9: right}[draw % 10]


def synthetic_rows(run: str, prompt: str, config: str, model: str = MODEL) -> list[dict[str, Any]]:
    """Samples rows as the runner writes them, varied per (run, config) so that every cell differs."""
    vocab = get_variant(prompt).vocabulary(config)
    rows = []
    for i in range(ROWS_PER_CONFIG):
        gold, direction = _gold_and_direction(config, vocab.labels, i)
        draw = zlib.crc32(f"{run}|{config}|{i}".encode())
        error = "RuntimeError: out of memory" if draw % 23 == 0 else None
        rows.append({
            "benchmark_clip_id": f"{config}-{i}", "category": config, "gold": gold, "pred": None,
            "raw": None if error else _raw(vocab.words, vocab.labels, gold, draw), "parsed": False,
            "prompt_variant": get_variant(prompt).name, "parser": vocab.parser.id,
            "answer_words": list(vocab.words), "tier": TIERS[i % len(TIERS)], "curve": CURVES[(i // 3) % len(CURVES)],
            "direction": direction, "source_clip_id": f"s{i % 4}", "error": error, "model": model, "mode": "generate",
        })  # fmt: skip
    return rows


def write_suite(out: Path, runs: Iterable[tuple[str, str, str, tuple[str, ...]]]) -> None:
    """Synthetic samples files for (run name, directory, prompt, configs) entries."""
    for name, dirname, prompt, configs in runs:
        for config in configs:
            write_jsonl(out / "runs" / dirname / f"samples_{config}.jsonl", synthetic_rows(name, prompt, config))


def _default_runs() -> list[tuple[str, str, str, tuple[str, ...]]]:
    # the external MELD runs (Table 22) come from `harness eval --task-kind classify`: absent, the table is skipped
    return [(r.name, r.dirname, r.prompt, tuple(r.configs)) for r in suite_runs() if not r.external]


def _tree(out: Path, names: Iterable[str]) -> dict[str, str]:
    """Relative path -> text of the suite files and every table file."""
    files = {name: (out / name).read_text(encoding="utf-8") for name in names}
    return files | {f"tables/{p.name}": p.read_text(encoding="utf-8") for p in sorted((out / "tables").iterdir())}


def _without_seconds(suite_json: str) -> str:
    """suite.json with the runs' wall-clock seconds (the one varying field) blanked."""
    return re.sub(r'"seconds": [0-9.]+', '"seconds": "<S>"', suite_json)


def _check(scenario: str, files: dict[str, str], out: Path) -> None:
    """The files (tmp path written as <OUT>) equal the stored snapshot, file for file and byte for byte."""
    folder = SNAPSHOTS / scenario
    files = {k: v.replace(str(out), "<OUT>") for k, v in files.items()}
    if os.environ.get("VOCALGRAD_UPDATE_SNAPSHOTS"):
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text, encoding="utf-8")
    stored = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert stored == set(files), f"{scenario}: files differ from the snapshot"
    for name, text in files.items():
        assert text == (folder / name).read_text(encoding="utf-8"), f"{scenario}/{name} differs from the snapshot"


def test_dry_run_matches_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model", MODEL, "--out", str(tmp_path), "--dry-run"]) == 0
    files = _tree(tmp_path, ["suite.json", "suite.md"])
    _check("dry_run", {**files, "stdout.txt": capsys.readouterr().out}, tmp_path)


def test_selected_dry_run_matches_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--model", MODEL, "--out", str(tmp_path), "--dry-run", "--only", "paraphrase,formats,main", "--skip", "ternary"]
    assert main(args) == 0
    files = {"suite.json": (tmp_path / "suite.json").read_text(encoding="utf-8"), "stdout.txt": capsys.readouterr().out}
    _check("dry_run_selected", files, tmp_path)


def test_complete_suite_matches_snapshot(tmp_path: Path) -> None:
    write_suite(tmp_path, _default_runs())
    status = assemble_tables(tmp_path, MODEL)
    assert set(status.values()) == {None}
    _check("complete", {**_tree(tmp_path, []), "status.json": json.dumps(status, indent=2) + "\n"}, tmp_path)


def test_partial_suite_matches_snapshot(tmp_path: Path) -> None:
    runs = [r for r in _default_runs() if r[0] != "beep"]
    runs = [(n, d, p, tuple(c for c in cs if not (n == "paraphrase-2" and c == "pitch"))) for n, d, p, cs in runs]
    runs = [(n, d, "default" if n == "audio_ref" else p, cs) for n, d, p, cs in runs]  # another variant's answers
    write_suite(tmp_path, runs)
    status = assemble_tables(tmp_path, MODEL)
    assert status["3"] and status["11"] and status["13"] and status["2"] is None
    _check("partial", {**_tree(tmp_path, []), "status.json": json.dumps(status, indent=2) + "\n"}, tmp_path)


def test_demo_run_matches_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--model", "always-increase", "--out", str(tmp_path), "--source", "demo", "--limit", "2",
            "--only", "beep,source-bias", "--batch-size", "4"]
    assert main(args) == 1
    files = _tree(tmp_path, ["suite.json", "suite.md"])
    files["suite.json"] = _without_seconds(files["suite.json"])
    captured = capsys.readouterr()
    # the suite's own lines (the runner's progress and results.json lines are the runner's to change)
    files["stdout.txt"] = "".join(line for line in captured.out.splitlines(True) if "/runs/" not in line)
    files["stderr.txt"] = "".join(line for line in captured.err.splitlines(True) if not line.startswith("[rank"))
    _check("demo_run", files, tmp_path)
