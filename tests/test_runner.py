"""The runner end to end on fake rows: sharding, retry, error rows, kill + resume, world-size changes,
idempotent reruns, a real 2-process `accelerate launch`, and the report/compare commands."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from harness import results as res
from harness.cli import main as cli_main
from harness.data import GeneratorSource, ParquetSource, SourceUnit, open_source
from harness.prompts import get_variant
from harness.runner import Dist, EvalSettings, assign_units, evaluate_batch, limit_units, run_eval
from tests.helpers.runner import CONFIGS, SR, FakeDist, FakeModel, Killed, fake_answer, make_release, merged
from tests.helpers.runner import clip_hash as _h
from vocalgrad_dataset import grid

ROOT = Path(__file__).resolve().parents[1]
ERROR_IDS = frozenset({"p902_01__p902_205__jump__high__down", "p901_01__p901_101__linear__low__up"})


def read_meta(release: Path) -> list[dict[str, str]]:
    with open(release / "metadata.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


def settings(out: Path, release: Path, **kw) -> EvalSettings:
    return EvalSettings(model="fake", configs=list(CONFIGS), out=str(out), dataset=str(release), batch_size=5,
                        **kw)


def run(out: Path, release: Path, model: FakeModel | None = None, dist=None, **kw):
    return run_eval(settings(out, release, **kw), model=model or FakeModel(ERROR_IDS),
                    source=open_source(dataset=str(release)), dist=dist or FakeDist(0, 1, True))


def snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def reference_run(release: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted single-process run (the real accelerate state, a single process here)."""
    out = tmp_path_factory.mktemp("ref")
    run_eval(settings(out, release), model=FakeModel(ERROR_IDS), source=open_source(dataset=str(release)),
             dist=Dist())
    return out


def test_single_process_run(reference_run: Path, release: Path) -> None:
    ids = [r["benchmark_clip_id"] for r in read_meta(release) if r["category"] == "background_noise"]
    rows = res.read_jsonl(res.samples_path(reference_run, "noise"))
    assert [r["benchmark_clip_id"] for r in rows] == ids  # dataset order, 72 rows
    by_id = {r["benchmark_clip_id"]: r for r in rows}
    for cid, r in by_id.items():
        if cid in ERROR_IDS:
            continue
        k = _h(cid) % 4
        assert r["retried"] is (k in (2, 3))  # unparsed at 128 tokens -> one retry at 256
        assert r["raw"] == fake_answer(cid, 256 if k in (2, 3) else 128)
        assert r["pred"] == {0: "increase", 1: "decrease", 2: "increase", 3: None}[k]
        assert r["gold"] == ("increase" if cid.endswith("__up") else "decrease")
        assert r["prompt"] == ("Does the background noise increase or decrease over time?\n\n"
                               'Answer with only one word: "increase" or "decrease".<audio>')
    results = json.loads((reference_run / "results.json").read_text())
    res.validate_results(results)
    assert results["config"]["batch_size"] == 5 and results["config"]["num_processes"] == 1
    assert results["vocalgrad_versions"]["parser"] == "1"
    assert results["configs"]["noise"]["n_expected"] == 72
    assert results["configs"]["noise"]["ids_sha256"] == grid.ids_sha256(ids)
    for c in CONFIGS:
        crow = res.read_jsonl(res.samples_path(reference_run, c))
        n_ok = sum(r["pred"] == r["gold"] and not r["error"] for r in crow)
        assert results["metrics"][c]["accuracy"] == pytest.approx(n_ok / 72)
    assert results["metrics"]["noise"]["n_error"] == 2 and results["metrics"]["volume"]["n_error"] == 2


def test_error_rows_keep_the_rest_of_their_batch(reference_run: Path) -> None:
    rows = [r for c in CONFIGS for r in res.read_jsonl(res.samples_path(reference_run, c))]
    errors = [r for r in rows if r["error"] is not None]
    assert sorted(r["benchmark_clip_id"] for r in errors) == sorted([*ERROR_IDS, *ERROR_IDS])  # both configs
    for r in errors:
        assert r["error"] == f"RuntimeError: boom: {r['benchmark_clip_id']}" and r["pred"] is None


def test_kill_then_resume_equals_uninterrupted(reference_run: Path, release: Path, tmp_path: Path) -> None:
    with pytest.raises(Killed):
        run(tmp_path, release, model=FakeModel(ERROR_IDS, kill_after=15))
    shard = res.shard_path(tmp_path, "volume", 0)
    assert len(res.read_jsonl(shard)) == 15  # 3 batches of 5 committed
    with open(shard, "a") as fh:
        fh.write('{"benchmark_clip_id": "p90')  # a torn line, as kill -9 mid-write leaves it
    run(tmp_path, release)
    assert merged(tmp_path) == merged(reference_run)
    assert not shard.read_bytes().endswith(b'"p90')  # the torn tail was cut before appending


def test_resume_with_another_world_size(reference_run: Path, release: Path, tmp_path: Path) -> None:
    run(tmp_path, release, dist=FakeDist(0, 2, False))  # rank 0 of 2 finishes its slice
    with pytest.raises(Killed):  # rank 1 of 2 dies after one batch
        run(tmp_path, release, model=FakeModel(ERROR_IDS, kill_after=5), dist=FakeDist(1, 2, False))
    r0 = res.read_jsonl(res.shard_path(tmp_path, "volume", 0))
    r1 = res.read_jsonl(res.shard_path(tmp_path, "volume", 1))
    # length-balanced: rank 0 took the longest source clip alone, rank 1 the two shorter ones
    assert {r["source_clip_id"] for r in r0} == {"p902_205"} and len(r1) == 5
    model = FakeModel(ERROR_IDS)
    run(tmp_path, release, model=model)  # resumed by one process
    assert merged(tmp_path) == merged(reference_run)
    assert len(res.read_jsonl(res.shard_path(tmp_path, "volume", 0))) == 24 + 43  # 48 - 5 left for rank 0


def test_rerun_adds_nothing_and_changes_nothing(reference_run: Path, release: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(reference_run, out)
    before = snapshot(out)
    model = FakeModel(ERROR_IDS)
    run(out, release, model=model)
    assert model.calls == 0
    assert snapshot(out) == before  # shards, merged samples and results.json byte-identical


def test_resume_refuses_another_prompt(reference_run: Path, release: Path, tmp_path: Path) -> None:
    shutil.copytree(reference_run, tmp_path / "run")
    with pytest.raises(ValueError, match=r"prompt_variant: \"default\" before, \"swap_order\" now"):
        run(tmp_path / "run", release, prompt="swap_order")


def test_limit_and_choices_mode(release: Path, tmp_path: Path) -> None:
    out = run(tmp_path, release, mode="choices", limit=30)
    rows = res.read_jsonl(res.samples_path(tmp_path, "volume"))
    assert len(rows) == 30 and out["n-samples"]["volume"] == {"original": 72, "effective": 30}
    for r in rows:
        margin = float(_h(r["benchmark_clip_id"]) % 3) - 1.0
        assert r["margin"] == margin
        assert r["pred"] == {1.0: "increase", -1.0: "decrease", 0.0: None}[margin]
        assert r["raw"] == r["pred"] and r["mode"] == "choices"


def test_choices_refused_for_generate_only_models(release: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="supports_choices is False"):
        run(tmp_path, release, model=FakeModel(supports_choices=False), mode="choices")


def test_evaluate_batch_isolates_prompt_errors() -> None:
    good = {"audio": {"array": np.zeros(8, np.float32), "sampling_rate": SR}, "category": "volume",
            "benchmark_clip_id": "p901_01__p901_101__jump__low__up", "label": "increase", "tier": "low",
            "curve": "jump", "direction": "up", "source_clip_id": "p901_101"}
    bad = {**good, "benchmark_clip_id": "p901_01__p901_101__jump__low__down", "audio": None}
    out = evaluate_batch(FakeModel(), [good, bad], get_variant("default"), EvalSettings("fake", ["volume"], "x"))
    retried = _h(good["benchmark_clip_id"]) % 4 in (2, 3)
    assert out[0]["error"] is None and out[0]["retried"] is retried
    assert out[0]["raw"] == fake_answer(good["benchmark_clip_id"], 256 if retried else 128)
    assert out[1]["error"].startswith("TypeError") and out[1]["pred"] is None


def test_assign_units_is_longest_first_to_least_loaded() -> None:
    units = [SourceUnit(str(i), d, (str(i),)) for i, d in enumerate([5, 4, 3, 3, 2, 1])]
    assert assign_units(units, 2) == [[0, 3, 5], [1, 2, 4]]  # loads 9 and 9
    assert assign_units(units, 1) == [[0, 1, 2, 3, 4, 5]]
    assert assign_units(units[:1], 3) == [[0], [], []]
    ids = tuple(f"i__c__{curve}__{tier}__{d}" for curve in ("linear", "jump") for tier in ("low", "mid", "high")
                for d in ("up", "down"))
    cut = limit_units([SourceUnit("i__c", 12.0, ids)], 6)
    assert cut[0].duration_sec == 6.0 and len(cut[0].clip_ids) == 6
    assert Counter(c.split("__")[2] for c in cut[0].clip_ids) == {"linear": 3, "jump": 3}
    assert Counter(c.split("__")[4] for c in cut[0].clip_ids) == {"up": 3, "down": 3}
    assert limit_units([SourceUnit("i__c", 12.0, ids)], 0.5) == cut  # a fraction of the 12
    assert limit_units([SourceUnit("i__c", 12.0, ids)], 0.5, seed=7) != cut  # the seed draws another sample


def test_parquet_build_matches_on_the_fly_rows(tmp_path: Path) -> None:
    from vocalgrad_dataset.build.export import build

    build("volume", ["test"], tmp_path, source="demo", progress=False)
    src = open_source(dataset=str(tmp_path))
    gen = GeneratorSource("test", "demo")
    assert isinstance(src, ParquetSource)
    units = src.units("volume")
    assert [u.clip_ids for u in units] == [u.clip_ids for u in gen.units("volume")]
    a, b = list(src.rows("volume", units[1:2])), list(gen.rows("volume", gen.units("volume")[1:2]))
    assert [r["benchmark_clip_id"] for r in a] == [r["benchmark_clip_id"] for r in b] == list(units[1].clip_ids)
    assert [r["label"] for r in a] == [r["label"] for r in b]  # ClassLabel ints decoded to names
    assert {r["label"] for r in a} == {"increase", "decrease"}
    for x, y in zip(a, b, strict=True):
        assert x["audio"]["sampling_rate"] == y["audio"]["sampling_rate"]
        assert np.array_equal(x["audio"]["array"], y["audio"]["array"])  # PCM16 round trip is exact


def test_generator_source_with_a_registry_baseline(tmp_path: Path) -> None:
    src = GeneratorSource("test", "demo")
    units = src.units("volume")
    assert len(units) >= 2 and all(len(u.clip_ids) == 24 for u in units)
    assert units[0].clip_ids[0].endswith("__linear__low__up")
    out = run_eval(EvalSettings("always-increase", ["volume"], str(tmp_path), source="demo", limit=30),
                   source=src, dist=FakeDist(0, 1, True))
    rows = res.read_jsonl(res.samples_path(tmp_path, "volume"))
    order = [cid for u in units for cid in u.clip_ids]
    ids = [r["benchmark_clip_id"] for r in rows]
    assert ids != order[:30] and ids == [cid for cid in order if cid in set(ids)]  # a sample, in dataset order
    # stratified: every source clip 10, each direction 15, each tier 10, each curve 7 or 8
    for part, counts in ((1, {10}), (4, {15}), (3, {10}), (2, {7, 8})):
        assert set(Counter(cid.split("__")[part] for cid in ids).values()) <= counts, part
    assert out["limited"] is True and out["config"]["limit"] == 30 and out["config"]["seed"] == 1234
    assert all(r["pred"] == "increase" and r["raw"] == "increase" for r in rows)
    n_up = sum(r["direction"] == "up" for r in rows)
    assert out["metrics"]["volume"]["accuracy"] == pytest.approx(n_up / 30)
    assert out["metrics"]["volume"]["increase_ratio"] == 1.0


def test_report_and_compare(reference_run: Path, release: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report"
    assert cli_main(["report", str(reference_run), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Kimi-Audio" in text and "| noise | 72 |" in text and "Accuracy by tier" in text
    assert (out / "accuracy_by_category.png").stat().st_size > 1000
    assert (out / "increase_bias_by_category.png").stat().st_size > 1000
    recomputed = json.loads((reference_run / "results.json").read_text())["metrics"]["noise"]["accuracy"]
    assert f"| noise | 72 | {100 * recomputed:.1f} |" in text
    other = tmp_path / "other"
    run(other, release, model=FakeModel())  # same clips, no errors
    assert cli_main(["compare", str(reference_run), str(other)]) == 0
    text = capsys.readouterr().out
    assert "McNemar" in text and "| volume | 72 |" in text


@pytest.mark.slow
def test_accelerate_launch_two_processes(reference_run: Path, release: Path, tmp_path: Path) -> None:
    out = tmp_path / "ddp"
    args = ["--model", "tests.helpers.runner:FakeModel", "--model-arg", f"error_ids={json.dumps(sorted(ERROR_IDS))}",
            "--dataset", str(release), "--configs", ",".join(CONFIGS), "--out", str(out), "--batch-size", "5"]
    launcher = [str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2",
                "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
                str(29500 + os.getpid() % 1000)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([*launcher, str(ROOT / "harness" / "eval.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for c in CONFIGS:  # both processes really ran: each wrote its own shard
        assert len(res.read_jsonl(res.shard_path(out, c, 0))) == 24  # the longest source clip
        assert len(res.read_jsonl(res.shard_path(out, c, 1))) == 48
    single = tmp_path / "single"  # the same command in this process (`harness eval`)
    assert cli_main(["eval", *[str(single) if a == str(out) else a for a in args]]) == 0
    assert merged(out) == merged(single)
    ddp, one = (json.loads((d / "results.json").read_text()) for d in (out, single))
    assert ddp["config"]["num_processes"] == 2 and one["config"]["num_processes"] == 1
    assert ddp["results"] == one["results"] and ddp["metrics"] == one["metrics"]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_accelerate_two_machines_on_loopback(release: Path, tmp_path: Path) -> None:
    """Issue 23: accelerate's multi-node launch, two "machines" on 127.0.0.1 (--num_machines 2, --machine_rank
    0 and 1, one process each, gloo on CPU) writing to one shared --out: the merged run equals a
    single-process run byte for byte."""
    out = tmp_path / "nodes"
    args = ["--model", "tests.helpers.runner:FakeModel", "--model-arg", f"error_ids={json.dumps(sorted(ERROR_IDS))}",
            "--dataset", str(release), "--configs", ",".join(CONFIGS), "--out", str(out), "--batch-size", "5"]
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    procs = []
    for rank in (0, 1):
        launcher = [str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_machines", "2",
                    "--machine_rank", str(rank), "--num_processes", "2", "--main_process_ip", "127.0.0.1",
                    "--main_process_port", str(port), "--mixed_precision", "no", "--dynamo_backend", "no"]
        procs.append(subprocess.Popen([*launcher, str(ROOT / "harness" / "eval.py"), *args], cwd=ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        outputs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err[-3000:]
    for c in CONFIGS:  # each machine's process wrote its own shard
        assert len(res.read_jsonl(res.shard_path(out, c, 0))) == 24
        assert len(res.read_jsonl(res.shard_path(out, c, 1))) == 48
    single = tmp_path / "single"  # the same command, one process (`harness eval`)
    assert cli_main(["eval", *[str(single) if a == str(out) else a for a in args]]) == 0
    assert merged(out) == merged(single)
    nodes, one = (json.loads((d / "results.json").read_text()) for d in (out, single))
    assert nodes["config"]["num_processes"] == 2 and one["config"]["num_processes"] == 1
    assert nodes["results"] == one["results"]


def test_results_schema_and_jsonl_tolerance(reference_run: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"missing 'n-samples'(.|\n)*missing 'date'"):
        res.validate_results({"results": {}, "groups": {}, "breakdowns": {}, "configs": {}, "config": {},
                              "versions": {"harness": "x", "parser": "1", "generator": "1", "results_schema": "1"}})
    good = json.loads((reference_run / "results.json").read_text())
    bad = {**good, "config": {**good["config"], "num_processes": "5"}}
    with pytest.raises(ValueError, match=r"config\.num_processes: expected integer"):
        res.write_results(tmp_path / "results.json", bad)
    assert not list(tmp_path.iterdir())  # nothing written, no temporary file left
    assert res.write_results(tmp_path / "results.json", good) is True
    assert res.write_results(tmp_path / "results.json", {**good, "date": "2030-01-01"}) is False  # date only
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n{"a": 2}\n{"a": ')
    assert res.read_jsonl(p) == [{"a": 1}, {"a": 2}]  # torn tail ignored
    assert res.repair_jsonl(p) == 6 and p.read_text() == '{"a": 1}\n{"a": 2}\n'
    p.write_text('{"a": 1}\n{"a" 2}\n{"a": 3}\n')
    with pytest.raises(ValueError, match=r"x\.jsonl:2: corrupt JSON line"):
        res.read_jsonl(p)  # damage in the middle is never silently skipped


def test_front_end_threads_leave_every_byte_unchanged(reference_run: Path, release: Path, tmp_path: Path) -> None:
    """The serial path (--frontend-workers 0) and three front-end threads write the reference run's files."""
    run(tmp_path / "serial", release, frontend_workers=0)
    run(tmp_path / "threads", release, frontend_workers=3)
    assert merged(tmp_path / "serial") == merged(reference_run) == merged(tmp_path / "threads")


def test_front_end_threads_kill_then_resume(reference_run: Path, release: Path, tmp_path: Path) -> None:
    """A model dying mid-run with batches prepared ahead loses none and duplicates none on resume."""
    with pytest.raises(Killed):
        run(tmp_path, release, model=FakeModel(ERROR_IDS, kill_after=15), frontend_workers=2)
    assert len(res.read_jsonl(res.shard_path(tmp_path, "volume", 0))) == 15
    run(tmp_path, release, frontend_workers=2)
    assert merged(tmp_path) == merged(reference_run)
