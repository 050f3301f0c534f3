"""results.json as lm-evaluation-harness tooling reads it: the TypedDict schema, lm-eval's keys, history,
environment and dataset manifest, --seed, --limit (count or fraction, stratified) and --batch-size auto."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from harness import results as res
from harness.cli import build_parser
from harness.models.baselines import AlwaysIncrease, RandomBaseline
from harness.models.protocol import Prompt
from harness.runner import EvalSettings, run_eval

ROOT = Path(__file__).resolve().parents[1]


def _typeddict_problems(value: Any, tp: Any, where: str) -> list[str]:
    """Missing required keys, undeclared keys, and the problems of every declared key's value."""
    if not isinstance(value, dict):
        return [f"{where}: not an object"]
    hints = typing.get_type_hints(tp)
    out = [f"{where}: missing {k}" for k in tp.__required_keys__ if k not in value]
    out += [f"{where}: undeclared key {k}" for k in value if k not in hints]
    for k, v in value.items():
        if k in hints:
            out += _conforms(v, hints[k], f"{where}.{k}")
    return out


def _container_problems(value: Any, origin: Any, args: tuple[Any, ...], where: str) -> list[str]:
    """dict[str, X] or list[X]: the container's own type, then every element against X."""
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        return [e for k, v in value.items() for e in _conforms(v, args[1], f"{where}.{k}")]
    if not isinstance(value, list):
        return [f"{where}: not a list"]
    return [e for i, v in enumerate(value) for e in _conforms(v, args[0], f"{where}[{i}]")]


# JSON's numbers: a bool is not a number, an int is a float.
_SCALARS: dict[Any, tuple[Any, str]] = {
    float: (lambda v: isinstance(v, int | float) and not isinstance(v, bool), "not a number"),
    type(None): (lambda v: v is None, "not null"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "not an integer"),
}


def _conforms(value: Any, tp: Any, where: str) -> list[str]:
    """Problems of `value` against a type hint, walked with typing alone (no harness code)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return []
    if typing.is_typeddict(tp):
        return _typeddict_problems(value, tp, where)
    if origin in (typing.Union, types.UnionType):
        return [] if any(not _conforms(value, a, where) for a in args) else [f"{where}: {value!r} is not {tp}"]
    if origin in (dict, list):
        return _container_problems(value, origin, args, where)
    if tp in _SCALARS:
        holds, problem = _SCALARS[tp]
        return [] if holds(value) else [f"{where}: {problem}"]
    return [] if isinstance(value, tp) else [f"{where}: {value!r} is not {tp.__name__}"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("results") / "run"
    run_eval(EvalSettings("random", ["volume", "noise-ternary"], str(out), source="demo", limit=0.25, seed=7))
    return out


def test_results_follow_the_typeddict(run: Path) -> None:
    obj = json.loads((run / "results.json").read_text())
    assert _conforms(obj, res.ResultsJSON, "results.json") == []
    assert _conforms({**obj, "extra": 1}, res.ResultsJSON, "r") == ["r: undeclared key extra"]  # the checker bites
    res.validate_results(obj)  # the JSON schema is derived from the same TypedDicts
    assert set(res.RESULTS_SCHEMA["required"]) == set(res.ResultsJSON.__required_keys__)
    assert "NaN" not in (run / "results.json").read_text()


# lm-evaluation-harness 0.4's results.json shape, written out by hand from its documentation and from
# lm_eval/utils.py::make_table (v0.4.9): for each task of "results", every key except "alias" is a
# "<metric>,<filter>" entry whose "<metric>_stderr,<filter>" twin is its standard error ("N/A" when none);
# "versions", "n-shot" and "higher_is_better" are keyed by task; higher_is_better maps metric -> True/False.
LM_EVAL_TASK_KEY = re.compile(r"^(?P<metric>[a-z0-9_]+),(?P<filter>none)$")


def _make_table_rows(obj: dict) -> list[tuple]:
    """(task, version, filter, n-shot, metric, higher_is_better, value, stderr): what make_table prints."""
    rows = []
    for task, dic in obj["results"].items():
        dic = dict(dic)
        alias = dic.pop("alias")
        for mf, v in sorted(dic.items()):
            m, _, f = mf.partition(",")
            if m.endswith("_stderr"):
                continue
            rows.append((alias, obj["versions"][task], f, obj["n-shot"][task], m, obj["higher_is_better"][task].get(m),
                         v, dic[f"{m}_stderr,{f}"]))
    return rows


def test_lm_eval_reads_the_results(run: Path) -> None:
    """lm-eval's shape exactly: metrics only as '<m>,none' with their '_stderr' twin (no counts, no bare keys),
    a version, n-shot and higher_is_better per task; our counts live where lm-eval does not look."""
    obj = json.loads((run / "results.json").read_text())
    for task, dic in obj["results"].items():
        keys = set(dic) - {"alias"}
        assert all(LM_EVAL_TASK_KEY.match(k.replace("_stderr,", ",")) for k in keys), sorted(keys)
        assert all(f"{k.split(',')[0]}_stderr,none" in keys for k in keys if "_stderr" not in k)
        assert isinstance(obj["versions"][task], str) and obj["versions"][task] != "N/A"
    shown = _make_table_rows(obj)
    assert len(shown) == len({(s[0], s[4]) for s in shown})  # every metric once
    assert {s[4] for s in shown} == {"accuracy", "parsed_accuracy", "balanced_accuracy", "macro_f1", "exact_match_rate",
                                     "exact_match_accuracy", "increase_ratio", "increase_ratio_all"}
    acc = [s for s in shown if s[0] == "volume" and s[4] == "accuracy"][0]
    k, n = obj["metrics"]["volume"]["n_correct"], obj["metrics"]["volume"]["n"]
    assert acc[2:] == ("none", 0, "accuracy", True, pytest.approx(k / n), pytest.approx((k / n * (1 - k / n) / n) ** 0.5))
    f1 = [s for s in shown if s[0] == "noise-ternary" and s[4] == "macro_f1"][0]
    assert f1[7] == "N/A"  # no closed-form stderr: lm-eval's own marker, never a number
    assert [s[5] for s in shown if s[4] == "increase_ratio"] == [None, None]  # best at 50 %, neither way
    assert obj["n-samples"] == {"volume": {"original": 72, "effective": 18}, "noise-ternary": {"original": 75, "effective": 19}}
    assert obj["groups"] == {"vocalgrad": {"alias": "vocalgrad", "accuracy,none": acc[6],
                                           "accuracy_stderr,none": obj["group_metrics"]["vocalgrad"]["accuracy_stderr"]}}
    # the headline mean is over the main categories: the ternary config keeps its own entry
    group = obj["group_metrics"]["vocalgrad"]
    assert group["configs"] == ["volume"] and group["accuracy"] == obj["metrics"]["volume"]["accuracy"]
    assert group["complete"] is False and obj["incomplete"] is None
    assert obj["vocalgrad_versions"]["parser"] == "1"


def test_lm_eval_make_table_prints_each_metric_once(run: Path) -> None:
    """lm-eval's own make_table (when lm-eval is installed) prints one row per metric, our versions, no count rows.

    Its lm_eval/utils.py is loaded by path: lm-eval 0.4.9's package __init__ imports its model classes, which need
    transformers 4 (transformers.AutoModelForVision2Seq), but make_table itself needs only numpy, yaml and jinja2."""
    import importlib.util

    found = importlib.util.find_spec("lm_eval")
    if found is None or not found.submodule_search_locations:
        pytest.skip("lm-eval is not installed")
    spec = importlib.util.spec_from_file_location("lm_eval_utils", Path(found.submodule_search_locations[0]) / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    obj = json.loads((run / "results.json").read_text())
    table = utils.make_table(obj)
    lines = [line for line in table.splitlines() if line.startswith("|") and "---" not in line][1:]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    # columns: Tasks | Version | Filter | n-shot | Metric | higher-is-better arrow | Value | ± | Stderr
    metrics = [c[4] for c in cells]
    assert len(metrics) == 16 and not {"n", "n_correct", "n_error", "accuracy_ci_low"} & set(metrics)
    assert all(c[2] == "none" for c in cells) and "N/A" not in {c[1] for c in cells if c[1]}
    volume_acc = next(c for c in cells if c[4] == "accuracy")
    assert volume_acc[0] == "volume" and volume_acc[1] == obj["versions"]["volume"] and volume_acc[5] == "↑"
    assert float(volume_acc[6]) == pytest.approx(obj["metrics"]["volume"]["accuracy"], abs=1e-4)
    assert "vocalgrad" in utils.make_table(obj, "groups")


def test_environment_timing_and_seed(run: Path) -> None:
    obj = json.loads((run / "results.json").read_text())
    env = obj["environment"]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert env["git_hash"] == (head or None)
    import datasets
    import torch

    assert env["packages"]["torch"] == torch.__version__ and env["packages"]["datasets"] == datasets.__version__
    assert env["cpu"] and env["gpu"] == ([torch.cuda.get_device_name(0)] if torch.cuda.is_available() else [])
    assert obj["start_time"] <= obj["end_time"] and obj["total_evaluation_time_seconds"] >= 0
    assert obj["dataset"] == {"source": "generate:demo", "manifest": None, "manifest_sha256": None}
    assert obj["model_info"]["name"] == "random"
    assert obj["config"]["seed"] == 7 and obj["config"]["limit"] == 0.25 and obj["limited"] is True
    rows = [json.loads(x) for x in (run / "samples_volume.jsonl").read_text().splitlines()]
    coin = RandomBaseline(seed=7)
    want = [coin.decide(Prompt((), r["benchmark_clip_id"], {"category": "volume"}))[0] for r in rows]
    assert [r["pred"] for r in rows] == want  # --seed reached the random baseline


def test_environment_names_gpus_without_loading_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that never imports torch (a baseline, an API model) asks nvidia-smi for the GPU names."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text('#!/bin/sh\n[ "$1" = "--query-gpu=name" ] && printf "NVIDIA H200\\nNVIDIA H200\\n"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert res.environment()["gpu"] == ["NVIDIA H200", "NVIDIA H200"]
    fake.write_text("#!/bin/sh\nexit 9\n")  # a driver that fails: no names, no crash
    assert res.environment()["gpu"] == []


def test_history_keeps_every_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_eval(EvalSettings("always-increase", ["volume"], str(out), source="demo", limit=6))
    run_eval(EvalSettings("always-increase", ["volume", "noise"], str(out), source="demo", limit=6))
    files = res.history(out)
    assert len(files) == 2 and all(f.name.startswith("results_") for f in files)
    latest = json.loads((out / "results.json").read_text())
    assert json.loads(files[-1].read_text()) == latest and list(latest["metrics"]) == ["volume", "noise"]
    assert list(json.loads(files[0].read_text())["metrics"]) == ["volume"]
    run_eval(EvalSettings("always-increase", ["volume", "noise"], str(out), source="demo", limit=6))
    assert len(res.history(out)) == 2  # a rerun that evaluated nothing new adds no entry


def test_dataset_manifest_hash(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text('{"pitch": "abc"}')
    info = res.dataset_info(types.SimpleNamespace(description=f"parquet:{tmp_path}", path=tmp_path))
    assert info["manifest_sha256"] == hashlib.sha256(b'{"pitch": "abc"}').hexdigest()
    assert info["manifest"] == str(tmp_path / "manifest.json")


class OutOfMemoryError(RuntimeError):
    """Named like torch's, which is how the base class recognises an OOM."""


class FitsFive(AlwaysIncrease):
    """Runs out of memory above 5 prompts per batch."""

    name = "fits-five"

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int) -> list[str]:
        if len(prompts) > 5:
            raise OutOfMemoryError(f"{len(prompts)} prompts")
        return super()._generate_batch(prompts, max_new_tokens)


def test_batch_size_auto_halves_to_what_fits(tmp_path: Path) -> None:
    model = FitsFive()
    out = run_eval(EvalSettings("fits-five", ["volume"], str(tmp_path), source="demo", batch_size="auto"),
                   model=model)
    assert out["config"]["batch_size"] == "auto" and out["config"]["batch_sizes"] == [4]  # 64 -> 32 -> ... -> 4
    assert model.stats["oom_halvings"] == 4 and out["metrics"]["volume"]["n_error"] == 0


@pytest.mark.parametrize(("argv", "ok"), [
    (["--limit", "10"], 10), (["--limit", "0.1"], 0.1), (["--limit", "0"], None), (["--limit", "1.5"], None),
    (["--limit", "-3"], None), (["--limit", "x"], None), (["--batch-size", "auto"], "auto"),
    (["--batch-size", "0"], None),
])  # fmt: skip
def test_limit_and_batch_size_arguments(argv: list[str], ok: Any, capsys: pytest.CaptureFixture) -> None:
    base = ["eval", "--model", "random", "--out", "x"]
    if ok is None:
        with pytest.raises(SystemExit):
            build_parser().parse_args(base + argv)
        assert f"argument {argv[0]}" in capsys.readouterr().err
        return
    ns = build_parser().parse_args(base + argv)
    assert getattr(ns, argv[0][2:].replace("-", "_")) == ok
