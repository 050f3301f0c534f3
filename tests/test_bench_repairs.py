"""benchmarks/bench_pclm_dpo.py on a minimal run: the base is evaluated once per config, every method is paired
with it, the recorded numbers are the paired test's on the samples files, and a rerun retrains nothing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from harness.metrics import binomial_interval, mcnemar
from harness.report import load_samples

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_pclm_dpo.py"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_pclm_dpo", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_methods_share_one_base_run_and_record_the_paired_test(tmp_path: Path, monkeypatch, capsys) -> None:
    bench = _bench()
    argv = ["--out", str(tmp_path), "--methods", "lora,dpo", "--configs", "volume", "--max-steps", "4",
            "--eval-limit", "12"]
    assert bench.main(argv) == 0
    record = json.loads((tmp_path / "benchmark.json").read_text())
    assert (tmp_path / "volume" / "lora" / "eval_base").is_dir()
    assert not (tmp_path / "volume" / "dpo" / "eval_base").exists()  # the base is evaluated once per config
    base = load_samples(tmp_path / "volume" / "lora" / "eval_base")["volume"]
    for method in ("lora", "dpo"):
        got = record["results"]["volume"][method]
        tuned = load_samples(tmp_path / "volume" / method / "eval")["volume"]
        want = mcnemar(base, tuned)
        assert got["n"] == want.n_pairs == 12
        assert (got["only_base_right"], got["only_tuned_right"]) == (want.only_a_correct, want.only_b_correct)
        assert got["mcnemar_exact_p"] == want.p_value
        k = sum(r["pred"] == r["gold"] for r in tuned)
        assert got["tuned"]["acc"] == k / 12
        assert (got["tuned"]["ci_low"], got["tuned"]["ci_high"]) == pytest.approx(binomial_interval(k, 12))
    assert record["results"]["volume"]["lora"]["only_tuned_right"] > 0  # four steps move this model
    assert record["stages"]["volume/dpo"][0]["objective"] == "dpo"
    table = capsys.readouterr().out
    assert "| volume | dpo | 12 |" in table
    monkeypatch.setattr(bench, "train", lambda settings: pytest.fail("a finished method was trained again"))
    assert bench.main(argv) == 0
    assert json.loads((tmp_path / "benchmark.json").read_text())["results"] == record["results"]
