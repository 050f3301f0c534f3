"""`--wandb-args` in W&B's offline mode: the run's files, read back here, hold results.json's metrics, the
config without secrets, lm-eval's results table and a samples table with audio.

The offline run is read from its `.wandb` file: W&B's record log (a LevelDB-style log: a 7-byte header, then
32 KiB blocks of records, each with a 7-byte header crc32 / length / type FULL-FIRST-MIDDLE-LAST) of
`wandb.proto.wandb_internal_pb2.Record` messages; summary and history records carry `key` (or `nested_key`)
and `value_json`. Skipped where wandb is not installed (the optional extra `wandb`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.cli import main as harness_cli
from tests.helpers.vllm_server import KEY, SERVED_ID, VLLMServer

ROOT = Path(__file__).resolve().parents[1]
# scripts/setup.sh installs wandb apart from .venv (its protobuf 7 must not load beside transformers here);
# VOCALGRAD_WANDB_PATH names another such folder. The run and the reading of its files happen in processes of
# their own with that folder on the path.
WANDB_PATH = Path(os.environ.get("VOCALGRAD_WANDB_PATH") or ROOT / ".extras" / "wandb")


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{WANDB_PATH}{os.pathsep}{ROOT}", **extra}


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """W&B in offline mode with every folder it writes to under tmp_path (the variables for the run's process)."""
    if not (WANDB_PATH / "wandb").is_dir():
        pytest.skip(f"no wandb installed apart at {WANDB_PATH} (scripts/setup.sh installs it)")
    root = tmp_path / "wandb-home"
    for var in ("WANDB_DIR", "WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(root / var.lower()))
        (root / var.lower()).mkdir(parents=True)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    return root


def test_offline_run_holds_results_config_tables_and_no_secret(offline: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    srv = VLLMServer()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    out = tmp_path / "run"
    model_arg = f"base_url={srv.url},model={SERVED_ID},api_key={KEY}"
    argv = ["eval", "--model", "openai-compatible", "--model-arg", model_arg, "--configs", "pitch", "--source",
            "demo", "--limit", "8", "--no-preflight", "--out", str(out),
            "--wandb-args", "project=vocalgrad-test,name=served-run,audio_per_config=3"]
    try:  # W&B records the command line: its process's argv holds the key too, and must not leak it
        done = subprocess.run([sys.executable, "-m", "harness.cli", *argv], env=_env({}), cwd=ROOT,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        srv.shutdown()
        srv.server_close()
    results = json.loads((out / "results.json").read_text())
    (run_file,) = (offline / "wandb_dir" / "wandb").glob("offline-run-*/run-*.wandb")
    read = subprocess.run([sys.executable, "-m", "tests.helpers.wandb_reader", str(run_file)], env=_env({}),
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert read.returncode == 0, read.stderr[-2000:]
    logged = json.loads(read.stdout)
    summary = logged["summary"]
    numeric = {f"{t}/{k.removesuffix(',none')}": v for block in ("results", "groups")
               for t, e in results.get(block, {}).items() for k, v in e.items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    assert numeric and all(summary[k] == pytest.approx(v) for k, v in numeric.items())
    assert summary["pitch/n"] == results["metrics"]["pitch"]["n"] == 8
    config = logged["config"]
    assert config["config"]["model_args"]["api_key"] == "***" and config["model_info"]["served_model"] == SERVED_ID
    tables = logged["tables"]
    # a logged table is stored as the run's artifact "run-<id>-<key without '/'>-<suffix>"
    samples = next(paths for name, paths in tables.items() if "-samplespitch" in name)
    assert sum(p.endswith(".wav") for p in samples) == 3 and any(p.endswith(".table.json") for p in samples)
    assert any("-evaluationeval_results" in name for name in tables)
    for f in offline.rglob("*"):  # nothing W&B wrote holds the key
        assert not f.is_file() or KEY.encode() not in f.read_bytes(), f


def test_wandb_args_are_parsed_like_lm_evals() -> None:
    from harness.tracking import parse_wandb_args

    assert parse_wandb_args('project=p,name=my run,tags=["a","b"]') == {"project": "p", "name": "my run",
                                                                        "tags": ["a", "b"]}


def test_without_wandb_the_run_is_refused_before_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    out = tmp_path / "run"
    assert harness_cli(["eval", "--model", "always-increase", "--configs", "pitch", "--source", "demo", "--limit", "2",
                        "--out", str(out), "--wandb-args", "project=p"]) != 0
    assert "pip install -e '.[wandb]'" in capsys.readouterr().err and not out.exists()
