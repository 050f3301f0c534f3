"""A task kind added from outside the package: docs/adding-a-kind.md's three files, installed as pip lays a
package out (a module and its data beside a `*.dist-info` whose entry_points.txt names them), then run through
`harness eval`, `harness report`, the leaderboard and DPO fine-tuning with no edit to the tree."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "adding-a-kind.md"


def page_files() -> dict[str, str]:
    """The page's fenced blocks that start with a `# <file>` line: file name -> text."""
    out = {}
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S):
        first, _, rest = body.partition("\n")
        if lang in ("python", "yaml") and first.startswith("# ") and "." in first:
            out[first[2:].strip()] = body if lang == "python" else rest
        elif lang == "toml":
            out["entry_points.txt"] = rest
    return out


def entry_points(toml: str) -> str:
    """pyproject's entry-point tables as entry_points.txt writes them."""
    text = re.sub(r'\[project\.entry-points\."([\w.]+)"\]', r"[\1]", toml)
    return re.sub(r'= "([^"]+)"', r"= \1", text)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    files = page_files()
    assert set(files) == {"vocalgrad_same3.py", "vocalgrad_same3_tasks/same3.yaml", "entry_points.txt"}
    for name in ("vocalgrad_same3.py", "vocalgrad_same3_tasks/same3.yaml"):
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(files[name], encoding="utf-8")
    info = site / "vocalgrad_same3-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vocalgrad-same3\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points(files["entry_points.txt"]))
    return site


def _run(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "CUDA_VISIBLE_DEVICES": "",
           "VOCALGRAD_PROGRESS": "off"}
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_a_plugin_kind_runs_through_eval_report_leaderboard_and_dpo(site: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    _run(site, "-m", "harness.cli", "eval", "--model", "random", "--configs", "volume-same3", "--source", "demo",
         "--out", str(run))
    results = json.loads((run / "results.json").read_text())
    assert results["configs"]["volume-same3"]["kind"] == "same3"
    rows = [json.loads(line) for line in (run / "samples_volume-same3.jsonl").read_text().splitlines()]
    # the recipe: augmented clips are "different", the unmodified source clip "same" (ids item__clip__source)
    assert {r["gold"] for r in rows} == {"same", "different"} and len(rows) == 75  # 3 demo clips x (24 + 1)
    assert all((r["gold"] == "same") == r["benchmark_clip_id"].endswith("__source") for r in rows)
    assert all(r["prompt"].startswith("Is the volume at the end the same as at the start?") for r in rows)
    assert {r["answer_words"][2] for r in rows} == {"unsure"} and all(r["parsed"] for r in rows)

    report = _run(site, "-m", "harness.cli", "report", str(run), "--out", str(tmp_path / "report")).stdout
    assert "## Same or different?" in report and "| volume-same3 | 75 |" in report

    subs, page = tmp_path / "subs", tmp_path / "site"
    subs.mkdir()
    _run(site, "-m", "harness.cli", "leaderboard", "submit", str(run), "--model-name", "random",
         "--out", str(subs / "same3.json"))
    _run(site, "-m", "harness.cli", "leaderboard", "build", str(subs), "--out", str(page))
    assert "random" in (page / "leaderboard.md").read_text()

    tuned = tmp_path / "dpo"
    _run(site, "-m", "finetune.train", "--model", "tiny-qwen2-audio", "--category", "volume-same3", "--source",
         "demo", "--scope", "all_linear", "--objective", "dpo", "--max-steps", "1", "--skip-eval", "--out", str(tuned))
    record = json.loads((tuned / "training.json").read_text())
    assert record["settings"]["category"] == "volume-same3"
