"""Table 4 (in-domain gains) and Figure 4 / Table 12 (cross-category matrix) of the paper suite, read from the
base model's main run and the adapters' external runs; expectations counted here from the samples files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.data import CONFIGS


def _accuracy(run: Path, config: str) -> float:
    rows = [json.loads(line) for line in (run / f"samples_{config}.jsonl").read_text().splitlines()]
    return 100 * sum(r["pred"] == r["gold"] for r in rows) / len(rows)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A main run and two adapters' runs (seeded random answers stand in for the models), then the tables."""
    from harness.cli import main as harness_main
    from harness.paper.cli import main as paper_main

    out = tmp_path_factory.mktemp("ft") / "suite"
    for seed, run in ((1, "main"), (2, "finetune-volume"), (3, "finetune-pitch")):
        assert harness_main(["eval", "--model", "random", "--seed", str(seed), "--source", "demo", "--limit", "4",
                             "--out", str(out / "runs" / run), "--no-preflight"]) == 0
    paper_main(["--model", "random", "--out", str(out), "--source", "demo", "--tables-only"])
    return out


def test_table4_in_domain_rows_are_base_and_adapter_accuracy_on_the_trained_category(suite: Path) -> None:
    text = (suite / "tables" / "table04_finetune_in_domain.md").read_text()
    assert "INCOMPLETE: missing samples: runs/finetune-speed" in text  # the other seven adapters are not there
    for category in ("volume", "pitch"):
        base, tuned = _accuracy(suite / "runs" / "main", category), _accuracy(suite / "runs" / f"finetune-{category}",
                                                                                category)
        assert f"| {category} | {base:.1f} | {tuned:.1f} | {tuned - base:+.1f} |" in text


def test_figure4_matrix_has_a_row_per_adapter_and_a_column_per_test_category(suite: Path) -> None:
    text = (suite / "tables" / "figure04_finetune_cross_category.md").read_text()
    assert "| model \\ tested on | " + " | ".join(CONFIGS) + " |" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| trained on volume |"))
    want = [f"{_accuracy(suite / 'runs' / 'finetune-volume', c):.1f}" for c in CONFIGS]
    assert row.strip("| ").split(" | ")[1:] == want
    assert any(ln.startswith("| trained on speed | — |") for ln in text.splitlines())
