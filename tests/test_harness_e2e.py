"""The harness on real generated clips: the oracle baseline, tiny real-class models in both modes, kill -9."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import results as res
from harness.cli import main as harness_cli
from harness.runner import EvalSettings, run_eval
from vocalgrad_dataset.categories import CATEGORY_NAMES

ROOT = Path(__file__).resolve().parents[1]


def test_signal_oracle_high_tier_through_the_harness(tmp_path: Path) -> None:
    out = run_eval(EvalSettings("signal-oracle", list(CATEGORY_NAMES), str(tmp_path), source="demo", batch_size=24))
    assert out is not None
    for config in CATEGORY_NAMES:
        rows = res.read_jsonl(res.samples_path(tmp_path, config))
        high = [r for r in rows if r["tier"] == "high"]
        assert len(rows) == 72 and len(high) == 24
        assert sum(r["pred"] == r["gold"] for r in high) / len(high) >= 0.95, config


@pytest.mark.parametrize("model", ["tiny-qwen2-audio", "tiny-audio-flamingo-3"])
@pytest.mark.parametrize("mode", ["generate", "choices"])
def test_tiny_models_end_to_end(model: str, mode: str, tmp_path: Path) -> None:
    assert harness_cli(["eval", "--model", model, "--configs", "pitch", "--source", "demo", "--mode", mode,
                        "--limit", "4", "--batch-size", "2", "--max-new-tokens", "4", "--out", str(tmp_path)]) == 0  # fmt: skip
    rows = res.read_jsonl(res.samples_path(tmp_path, "pitch"))
    conditions = [r["benchmark_clip_id"].split("__", 2)[2] for r in rows]
    # --limit is stratified (seed 1234): distinct tiers and curves, both directions twice, same every run
    assert conditions == ["quad_first_flat__high__down", "quad_last_flat__mid__up", "jump__low__up", "linear__mid__down"]
    assert all(r["error"] is None and isinstance(r["raw"], str) for r in rows)
    if mode == "choices":
        assert all(r["pred"] in ("increase", "decrease") and isinstance(r["margin"], float) for r in rows)
        assert all((r["margin"] > 0) == (r["pred"] == "increase") for r in rows)


def test_kill_9_mid_run_then_resume_equals_uninterrupted(tmp_path: Path) -> None:
    args = ["--model", "tiny-qwen2-audio", "--configs", "volume", "--source", "demo", "--mode", "generate",
            "--limit", "12", "--batch-size", "1", "--max-new-tokens", "3", "--retry-max-new-tokens", "0"]  # fmt: skip
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    assert harness_cli(["eval", *args, "--out", str(clean)]) == 0
    proc = subprocess.Popen([sys.executable, str(ROOT / "harness" / "eval.py"), *args, "--out", str(killed)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    shard = res.shard_path(killed, "volume", 0)
    deadline = time.time() + 120
    while time.time() < deadline and (not shard.exists() or len(shard.read_text().splitlines()) < 3):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(res.read_jsonl(shard))
    assert 3 <= done < 12, "the kill must land mid-run"
    assert harness_cli(["eval", *args, "--out", str(killed)]) == 0
    assert (killed / "samples_volume.jsonl").read_bytes() == (clean / "samples_volume.jsonl").read_bytes()


def test_data_workers_give_the_same_samples(tmp_path: Path) -> None:
    runs = {}
    for workers in (0, 2):  # two configs: the row pool starts the second's rows while the first ends
        out = tmp_path / f"w{workers}"
        run_eval(EvalSettings("signal-oracle", ["volume", "pitch"], str(out), source="demo", data_workers=workers))
        runs[workers] = [(out / f"samples_{c}.jsonl").read_bytes() for c in ("volume", "pitch")]
    assert runs[0] == runs[2] and [r.count(b"\n") for r in runs[0]] == [72, 72]
