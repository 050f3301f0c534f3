"""Bad input and faults, round five (issue 47): each defect found by the round-four hostile cases, rerun."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from harness.kinds.choice import CLASSIFY, MCQ

ORDERS = ("low-high-medium", "high-low-medium", "medium-low-high")
COLUMNS = "audio=wav,question=q,options=opts,answer=gold,adversarial=adv,task=t,id=key"


def _wav(samples: np.ndarray | None = None) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.zeros(1600, np.float32) if samples is None else samples, 16000, format="WAV",
             subtype="FLOAT")
    return buf.getvalue()


def _bench(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path / "test-00000.parquet")
    return path


def _item(i: int, **over: Any) -> dict[str, Any]:
    return {"key": f"q{i}", "wav": {"bytes": _wav(), "path": None}, "q": "Which order?", "opts": list(ORDERS),
            "gold": ORDERS[1], "adv": ORDERS[0], "t": "pitch", **over}


class _FirstOption:
    """A baseline answering option A to everything (built lazily: the harness imports stay inside tests)."""

    @staticmethod
    def make() -> Any:
        from harness.models.baselines import LabelBaseline

        class FirstOption(LabelBaseline):
            def decide(self, prompt: Any) -> tuple[str, float]:
                return prompt.meta["answer_labels"][0], 1.0

        return FirstOption("first-option")


def _run(path: Path, out: Path, configs: list[str] | None = None, **kw: Any) -> dict[str, Any] | None:
    from harness.runner import EvalSettings, run_eval

    settings = EvalSettings("first-option", configs or ["pitch"], str(out), dataset=str(path), kind=MCQ.name,
                            columns=COLUMNS, preflight=False, **kw)
    return run_eval(settings, model=_FirstOption.make())


def _files_under(root: Path) -> set[Path]:
    return {p.resolve() for p in root.rglob("*") if p.is_file()}


# ---- 1. path traversal --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["../../../../x/PWNED", "a/b", "..", ".hidden", "<img src=x>", "a\x00b", "",
                                  "x" * 300, "C:\\evil", "名前"])
def test_safe_component_is_one_plain_file_name(text: str) -> None:
    from vocalgrad_dataset.fileio import safe_component

    name = safe_component(text)
    assert name and name == Path(name).name and not name.startswith(".") and "/" not in name
    assert "\\" not in name and "\x00" not in name and len(name) <= 80
    assert all(c.isascii() and (c.isalnum() or c in "._+-") for c in name)


def test_safe_component_keeps_ordinary_names_and_separates_different_texts() -> None:
    from vocalgrad_dataset.fileio import safe_component

    assert [safe_component(t) for t in ("pitch", "meld-emotion", "volume-conflict", "v1.2")] == [
        "pitch", "meld-emotion", "volume-conflict", "v1.2"]
    assert safe_component("a/b") != safe_component("a_b") and safe_component("a/b") != safe_component("a\\b")


def test_a_task_named_like_a_path_stays_inside_out_and_is_recorded(tmp_path: Path) -> None:
    evil = "../../../../x/PWNED"
    path = _bench(tmp_path / "b", [_item(i, t=evil if i % 2 else "a/b") for i in range(4)])
    out = tmp_path / "deep" / "er" / "run"
    before = _files_under(tmp_path)
    _run(path, out, configs=[evil, "a/b"])
    written = _files_under(tmp_path) - before
    assert written and all(out.resolve() in p.parents for p in written), sorted(map(str, written))
    assert not list(tmp_path.rglob("PWNED*"))
    res = json.loads((out / "results.json").read_text())
    for task in (evil, "a/b"):
        name = res["sample_files"][task]
        assert (out / name).is_file() and Path(name).name == name
        assert json.loads((out / name).read_text().splitlines()[0])["category"] == task
    from harness.report import load_samples

    assert set(load_samples(out)) == {evil, "a/b"}  # read back under the recorded task names


# ---- 2. credentials inside URLs -------------------------------------------------------------------------------
def test_redact_removes_url_credentials_and_signatures() -> None:
    from harness.redact import public, redact, secret_values

    args = {"base_url": "http://user:PASS1234@host.example/v1?sig=SIGNATURE99&api-version=2024-02-01",
            "api_key": "k-1234567890", "max_new_tokens": 128, "urls": ["https://h/x?token=TOKVALUE#a"]}
    out = redact(args)
    text = json.dumps(out)
    for secret in ("PASS1234", "user:", "SIGNATURE99", "k-1234567890", "TOKVALUE"):
        assert secret not in text
    assert out["base_url"] == "http://***@host.example/v1?sig=***&api-version=2024-02-01"
    assert out["max_new_tokens"] == 128
    assert {"user:PASS1234", "SIGNATURE99"} <= set(secret_values(args))
    assert public(args)["base_url"] == out["base_url"] and "api_key" not in public(args)  # the resume key's view


def test_no_file_of_a_run_holds_a_url_credential(tmp_path: Path) -> None:
    path = _bench(tmp_path / "b", [_item(i) for i in range(2)])
    out = tmp_path / "run"
    url = "http://alice:S3cretPW@llm.example/v1?sig=SIGxyz123"
    _run(path, out, model_args={"base_url": url})
    for file in out.rglob("*"):
        if file.is_file():
            text = file.read_text(encoding="utf-8", errors="replace")
            assert "S3cretPW" not in text and "SIGxyz123" not in text, file
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["model_args"]["base_url"] == "http://***@llm.example/v1?sig=***"
    from harness.leaderboard.submit import make_submission

    res["config"]["model_args"]["base_url"] = url  # a run written before URLs were redacted
    (out / "results.json").write_text(json.dumps(res))
    sub = make_submission(out, model_name="m")
    assert "S3cretPW" not in json.dumps(sub) and "SIGxyz123" not in json.dumps(sub)


def test_a_resume_ignores_a_rotated_url_password(tmp_path: Path) -> None:
    path = _bench(tmp_path / "b", [_item(i) for i in range(2)])
    out = tmp_path / "run"
    _run(path, out, model_args={"base_url": "http://alice:one11111@llm.example/v1"})
    _run(path, out, model_args={"base_url": "http://alice:two22222@llm.example/v1"})  # no refusal
    with pytest.raises(ValueError, match="model_args.base_url"):
        _run(path, out, model_args={"base_url": "http://alice:two22222@other.example/v1"})


# ---- 9. PWD is no secret ---------------------------------------------------------------------------------------
def test_the_working_directory_is_not_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.redact import environment_secrets

    monkeypatch.setenv("PWD", "/home/someone/projects/vocalgrad")
    monkeypatch.setenv("OLDPWD", "/home/someone/projects")
    monkeypatch.setenv("DB_PASSWORD", "hunter2hunter2")
    found = environment_secrets()
    assert "/home/someone/projects/vocalgrad" not in found and "/home/someone/projects" not in found
    assert "hunter2hunter2" in found


# ---- 6. the mapped file in the resume key ------------------------------------------------------------------------
def test_corrected_answers_in_a_mapped_file_are_not_resumed_over(tmp_path: Path) -> None:
    path = _bench(tmp_path / "b", [_item(i) for i in range(4)])
    out = tmp_path / "run"
    _run(path, out)
    fixed = [_item(i, gold=ORDERS[2]) for i in range(4)] + [_item(i) for i in range(4, 6)]
    _bench(path, fixed)
    with pytest.raises(ValueError, match="data_fingerprint"):
        _run(path, out)
    fresh = tmp_path / "run2"
    _run(path, fresh)
    rows = [json.loads(x) for x in (fresh / "samples_pitch.jsonl").read_text().splitlines()]
    assert [r["gold"] for r in rows] == [ORDERS[2]] * 4 + [ORDERS[1]] * 2


# ---- 16. markup and formulas -------------------------------------------------------------------------------------
def test_report_md_carries_no_raw_html_from_a_task_name(tmp_path: Path) -> None:
    evil = "<img src=x onerror=alert(1)>|x"
    path = _bench(tmp_path / "b", [_item(i, t=evil) for i in range(2)])
    out = tmp_path / "run"
    _run(path, out, configs=[evil])
    from harness.report import report

    text = report(out, figures=False)
    saved = (out / "report.md").read_text()
    assert "<img" not in text and "<img" not in saved and "&lt;img src=x onerror=alert(1)>" in saved
    table = next(line for line in saved.splitlines() if "onerror" in line and line.startswith("|"))
    assert "\\|x" in table  # the task's | does not open a new cell


@pytest.mark.parametrize(("value", "expected"), [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+1+cmd", "'+1+cmd"), ("@SUM(A1)", "'@SUM(A1)"),
    ("-2+3", "'-2+3"), ("\tx", "'\tx"), ("-2.5", "-2.5"), ("alice", "alice"), (3, 3),
])  # fmt: skip
def test_csv_cell_defuses_formulas_only(value: Any, expected: Any) -> None:
    from harness.tables import csv_cell

    assert csv_cell(value) == expected


# ---- 8. broken input audio -------------------------------------------------------------------------------------
def test_empty_nan_and_infinite_audio_are_error_rows_naming_the_clip(tmp_path: Path) -> None:
    nan, inf = np.zeros(1600, np.float32), np.zeros(1600, np.float32)
    nan[10], inf[20] = np.nan, np.inf
    bad = {"q1": np.zeros(0, np.float32), "q2": nan, "q3": inf}
    items = [_item(0)] + [_item(i, wav={"bytes": _wav(bad[f"q{i}"]), "path": None}) for i in (1, 2, 3)]
    path = _bench(tmp_path / "b", items)
    out = tmp_path / "run"
    heard: list[str] = []
    model = _FirstOption.make()
    decide = model.decide
    model.decide = lambda prompt: (heard.append(prompt.clip_id), decide(prompt))[1]  # type: ignore[method-assign]
    from harness.runner import EvalSettings, run_eval

    with pytest.raises(Exception, match="incomplete run"):  # 3 of 4 rows failed: more than --max-error-rate
        run_eval(EvalSettings("first-option", ["pitch"], str(out), dataset=str(path), kind=MCQ.name,
                              columns=COLUMNS, preflight=False), model=model)
    rows = {r["benchmark_clip_id"]: r for r in map(json.loads, (out / "samples_pitch.jsonl").read_text().splitlines())}
    assert heard == ["q0"] and rows["q0"]["error"] is None
    assert rows["q1"]["error"].endswith("clip q1: audio has 0 samples")
    assert "clip q2: audio holds 1 NaN samples of 1600" in rows["q2"]["error"]
    assert "clip q3: audio holds 1 infinite samples of 1600" in rows["q3"]["error"]
    assert all(rows[c]["pred"] is None and not rows[c]["parsed"] for c in ("q1", "q2", "q3"))


# ---- 5. numeric options ------------------------------------------------------------------------------------------
def test_an_integer_answer_is_the_option_of_that_text_before_an_index(tmp_path: Path) -> None:
    rows = [_item(i, opts="1|2|3|4", gold=g, adv=None) for i, g in enumerate((1, 2, 3, 4))]
    path = _bench(tmp_path / "b", rows)
    assert pa.types.is_integer(pq.read_table(path / "test-00000.parquet").schema.field("gold").type)
    src = MCQ.mapped_source(str(path), "test", COLUMNS)
    assert [r["answer"] for r in src.rows("pitch", src.units("pitch"))] == ["1", "2", "3", "4"]


def test_an_integer_answer_matching_no_option_text_is_still_an_index(tmp_path: Path) -> None:
    from harness.mcq import option_answer

    assert option_answer(1, list(ORDERS), "w", "answer") == ORDERS[1]
    assert option_answer(2.0, ["1", "2", "3"], "w", "answer") == "2"  # a CSV's float column
    assert option_answer("B", ["1", "2", "3"], "w", "answer") == "2"


# ---- 7. label sets -----------------------------------------------------------------------------------------------
def _classify(tmp_path: Path, labels: list[Any], name: str = "items.jsonl") -> Path:
    path = tmp_path / name
    lines = [json.dumps({"wav": {"bytes": None, "path": "x.wav"}, "label": lab, "utt": f"u{i}"})
             for i, lab in enumerate(labels)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_null_label_is_refused_naming_the_row(tmp_path: Path) -> None:
    path = _classify(tmp_path, ["joy", None, "anger"])
    with pytest.raises(ValueError, match=r"items.jsonl: row 1: empty label \(None\)") as err:
        CLASSIFY.mapped_source(str(path), "test", "audio=wav,label=label,id=utt")
    assert "\n" not in str(err.value)


def test_the_meld_layout_offers_the_protocols_seven_labels_and_refuses_a_typo(tmp_path: Path) -> None:
    from harness.meld import MELD_EMOTIONS
    from tests.helpers.meld import build_meld_shaped

    folder = build_meld_shaped(tmp_path, {"joy": 1, "neutral": 1, "anger": 1})
    src = CLASSIFY.mapped_source(str(folder), "test", None)
    rows = list(src.rows("meld", src.units("meld")))
    assert all(r["options"] == sorted(MELD_EMOTIONS) for r in rows) and len(rows[0]["options"]) == 7
    csv_file = folder / "test_sent_emo.csv"
    csv_file.write_text(csv_file.read_text().replace("Anger", "Angry"))
    with pytest.raises(ValueError, match=r"test_sent_emo.csv: row 0: label 'Angry' is not one of the "
                                         r"labels of task 'meld'; did you mean 'anger'\?"):
        CLASSIFY.mapped_source(str(folder), "test", None)


# ---- 14. reports check their inputs -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from harness.runner import EvalSettings, run_eval

    out = tmp_path_factory.mktemp("demo") / "run"
    run_eval(EvalSettings("always-increase", ["volume"], str(out), source="demo", limit=6, preflight=False))
    return out


def _copy_run(run: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(run, dest)
    return dest


def test_report_counts_a_repeated_line_once_with_a_warning(demo_run: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from harness.report import compute

    run = _copy_run(demo_run, tmp_path / "run")
    file = run / "samples_volume.jsonl"
    lines = file.read_text().splitlines()
    file.write_text("\n".join(lines + lines[:3]) + "\n")
    assert compute(run)["metrics"]["volume"]["n"] == len(lines)
    err = capsys.readouterr().err
    assert "samples_volume.jsonl: 3 repeated line(s) counted once" in err


def test_report_refuses_a_gold_that_contradicts_its_clip_id(demo_run: Path, tmp_path: Path) -> None:
    from harness.report import compute

    run = _copy_run(demo_run, tmp_path / "run")
    file = run / "samples_volume.jsonl"
    rows = [json.loads(x) for x in file.read_text().splitlines()]
    flip = {"increase": "decrease", "decrease": "increase"}
    rows[0]["gold"] = flip[rows[0]["gold"]]
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=rf"samples_volume.jsonl: 1 row\(s\) whose gold contradicts its clip id "
                                         rf"\(e.g. {rows[0]['benchmark_clip_id']}\)"):
        compute(run)
    rows[0]["gold"] = flip[rows[0]["gold"]]
    file.write_text("".join(json.dumps(r) + "\n" for r in [*rows, {**rows[1], "raw": "something else"}]))
    with pytest.raises(ValueError, match="has two different rows"):
        compute(run)


# ---- 15. intervals -----------------------------------------------------------------------------------------------
def test_the_paired_gap_interval_is_newcombes() -> None:
    from harness.metrics import newcombe_paired_interval

    # contingencytables (Fagerland, Lydersen & Laake) tests/testthat/test-ch8.R: cavo_2012 = rbind(c(59, 6),
    # c(16, 80)) gives "estimate = -0.0621 (95% CI -0.1186 to -0.0046)"
    first = [True] * 65 + [False] * 96
    second = [True] * 59 + [False] * 6 + [True] * 16 + [False] * 80
    lo, hi = newcombe_paired_interval(first, second)
    assert round(lo, 4) == -0.1186 and round(hi, 4) == -0.0046


def _mcq_rows(preds: list[str | None]) -> list[dict[str, Any]]:
    return [{"benchmark_clip_id": f"q{i}", "gold": ORDERS[1], "pred": p, "parsed": p is not None, "error": None,
             "adversarial": ORDERS[0], "options": list(ORDERS), "source_clip_id": f"q{i}"} for i, p in enumerate(preds)]


def test_the_ala_gap_interval_stays_within_plus_minus_one_on_few_items() -> None:
    from harness.metrics import mcq_summary

    s = mcq_summary(_mcq_rows([ORDERS[0], ORDERS[1]]))  # one ALA hit, one GT hit: gap 0 over 2 items
    assert s["ala_gap"] == 0.0 and -1.0 <= s["ala_gap_ci_low"] < 0 < s["ala_gap_ci_high"] <= 1.0


def test_a_one_task_macro_mean_has_its_tasks_interval() -> None:
    from harness.classification import classification_macro, classification_summary
    from harness.metrics import mcq_macro, mcq_summary

    rows = _mcq_rows([ORDERS[0], ORDERS[1], ORDERS[1], None, ORDERS[2]])
    one, task = mcq_macro({"t": rows}), mcq_summary(rows)
    for m in ("acc", "ala", "ala_gap"):
        assert (one[f"{m}_ci_low"], one[f"{m}_ci_high"]) == (task[f"{m}_ci_low"], task[f"{m}_ci_high"])
    crows = [{**r, "options": ["a", "b"], "gold": "a", "pred": "b"} for r in rows]
    one, task = classification_macro({"t": crows}), classification_summary(crows)
    assert (one["accuracy_ci_low"], one["accuracy_ci_high"]) == (task["accuracy_ci_low"], task["accuracy_ci_high"])


def test_classification_accuracy_of_zero_of_eight_has_the_wilson_interval() -> None:
    from scipy.stats import binomtest

    from harness.classification import classification_metrics

    m = classification_metrics(["a"] * 8, ["b"] * 8, ["a", "b"])
    want = binomtest(0, 8).proportion_ci(method="wilson")
    assert m["accuracy"] == 0.0 and m["accuracy_ci_low"] == pytest.approx(want.low, abs=1e-12)
    assert m["accuracy_ci_high"] == pytest.approx(want.high) and want.high > 0.3


# ---- 3. an adapter of another family; 12 / minor: damaged weight files ---------------------------------------------
def _adapter(folder: Path, base: str, family: str | None = None) -> Path:
    from safetensors.numpy import save_file

    adapter = folder / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base, "peft_type": "LORA"}))
    save_file({"w": np.zeros((4, 4), np.float32)}, str(adapter / "adapter_model.safetensors"))
    if family is not None:
        (folder / "training.json").write_text(json.dumps({"base_model": {"family": family}}))
    return adapter


def test_an_adapter_trained_on_another_family_is_refused_by_name(tmp_path: Path) -> None:
    from harness.models.base import ModelError
    from harness.models.weights_check import check_adapter_family

    unknown = lambda base: None  # noqa: E731 - a checkpoint that cannot be read here decides nothing
    recorded = _adapter(tmp_path / "run", "some/local-copy", family="qwen2-audio")
    with pytest.raises(ModelError, match=r"trained on a qwen2-audio model \(.*training.json\), not on "
                                         r"audio-flamingo-3") as err:
        check_adapter_family(str(recorded), "audio-flamingo-3", ("nvidia/audio-flamingo-3-hf",), unknown)
    assert "\n" not in str(err.value)
    by_base = _adapter(tmp_path / "peft", "Qwen/Qwen2-Audio-7B-Instruct")
    with pytest.raises(ModelError, match="base_model_name_or_path 'Qwen/Qwen2-Audio-7B-Instruct'"):
        check_adapter_family(str(by_base), "audio-flamingo-3", ("nvidia/audio-flamingo-3-hf",),
                             lambda base: "qwen2-audio" if "Qwen2-Audio" in base else None)
    check_adapter_family(str(recorded), "qwen2-audio", ("Qwen/Qwen2-Audio-7B-Instruct",), unknown)  # its own: fine


def test_the_registry_refuses_a_tiny_adapter_of_another_family(tmp_path: Path) -> None:
    from harness.models.base import ModelError
    from harness.models.registry import get_model

    adapter = _adapter(tmp_path, "tiny-qwen2-audio")
    with pytest.raises(ModelError, match="trained on a qwen2-audio model .* not on audio-flamingo-3"):
        get_model("tiny-audio-flamingo-3", adapter=str(adapter))


def test_a_truncated_safetensors_or_adapter_config_is_named(tmp_path: Path) -> None:
    from harness.models.base import ModelError
    from harness.models.weights_check import adapter_config, check_safetensors

    adapter = _adapter(tmp_path, "tiny-voxtral")
    weights = adapter / "adapter_model.safetensors"
    check_safetensors(weights)  # intact
    weights.write_bytes(weights.read_bytes()[:-10])
    with pytest.raises(ModelError, match=r"adapter_model.safetensors: \d+ bytes but its header describes"):
        check_safetensors(weights)
    weights.write_bytes(b"\x05")
    with pytest.raises(ModelError, match="adapter_model.safetensors: not a safetensors file or truncated"):
        check_safetensors(weights)
    config = adapter / "adapter_config.json"
    config.write_text(config.read_text()[:20])
    with pytest.raises(ModelError, match=r"adapter_config.json: not readable JSON"):
        adapter_config(adapter)


def test_progress_off_silences_the_libraries_bars_at_every_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from vocalgrad_dataset.cli.info import run_command

    monkeypatch.setenv("VOCALGRAD_PROGRESS", "off")
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    monkeypatch.delenv("HF_DATASETS_DISABLE_PROGRESS_BARS", raising=False)
    parser = argparse.ArgumentParser(prog="x")
    parser.set_defaults(func=lambda ns: 0)
    assert run_command(parser, [], (ValueError,)) == 0
    import os

    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1" == os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"]


# ---- 4. a smoke run is not printed as the paper's table --------------------------------------------------------------
def test_paper_tables_say_a_run_was_limited_or_off_the_benchmarks_source(tmp_path: Path) -> None:
    from harness.data import CONFIGS
    from harness.paper.run import assemble_tables
    from harness.results import write_jsonl

    model = "tiny-qwen2-audio"
    for c in CONFIGS:  # samples rows as the runner writes them (two per category, both right)
        write_jsonl(tmp_path / "runs" / "main" / f"samples_{c}.jsonl", [
            {"benchmark_clip_id": f"{c}-{i}", "category": c, "gold": g, "pred": None, "raw": g, "parsed": False,
             "prompt_variant": "default", "parser": "main-unique-direction-v1", "answer_words": ["increase", "decrease"],
             "tier": "low", "curve": "linear", "direction": d, "source_clip_id": f"s{i}", "error": None,
             "model": model, "mode": "generate"} for i, (g, d) in enumerate((("increase", "up"), ("decrease", "down")))])
    results = {"limited": True, "config": {"limit": 2, "seed": 0, "source": "generate:demo"},
               "n-samples": {c: {"original": 48, "effective": 2} for c in CONFIGS}}
    (tmp_path / "runs" / "main" / "results.json").write_text(json.dumps(results))
    assemble_tables(tmp_path, model)
    table2 = (tmp_path / "tables" / "table02_main_accuracy.md").read_text()
    assert "_**Not the paper's table:** main: LIMITED RUN (--limit 2, seed 0)" in table2
    assert "main: source generate:demo: the demo clips, not the benchmark's vctk clips" in table2
    results = {"limited": False, "config": {"source": "generate:vctk"},
               "n-samples": {c: {"original": 48, "effective": 48} for c in CONFIGS}}
    (tmp_path / "runs" / "main" / "results.json").write_text(json.dumps(results))
    assemble_tables(tmp_path, model)
    assert "Not the paper's table" not in (tmp_path / "tables" / "table02_main_accuracy.md").read_text()


# ---- 10. a conflict config on a source without claims ------------------------------------------------------------------
def test_a_conflict_config_on_a_source_without_claims_is_refused_in_one_line(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    code = main(["eval", "--model", "random", "--configs", "volume-conflict", "--source", "demo",
                 "--out", str(tmp_path / "run"), "--no-preflight"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "config 'volume-conflict' needs the claims source" in err[0] and "--source demo has none" in err[0]
    assert not (tmp_path / "run" / "results.json").exists()


# ---- 11. leaderboard claims tied to the run's record ---------------------------------------------------------------------
def test_a_submission_cannot_claim_another_precision_or_hide_its_opt_ins(demo_run: Path) -> None:
    from harness.leaderboard.submit import make_submission
    from harness.leaderboard.validate import validate_submission

    sub = make_submission(demo_run, model_name="m")
    sub["results"]["config"]["model_args"] = {"dtype": "bf16", "tf32": True}
    sub["results"]["model_info"] = {"dtype": "bfloat16",
                                    "not_paper_protocol": ["dtype bfloat16 (the protocol's: float32)", "tf32 matmuls"]}
    sub["model"]["precision"] = "bfloat16"
    honest = validate_submission(sub)
    assert not [e for e in honest if "dtype" in e or "tf32" in e or "precision" in e], honest
    sub["model"]["precision"] = "float32"  # the tamper of the issue: float32 and "paper protocol"
    sub["results"]["model_info"]["not_paper_protocol"] = []
    found = " | ".join(validate_submission(sub))
    assert "model.precision float32 but the run's model reported dtype bfloat16" in found
    assert "the run was given --tf32 but not_paper_protocol does not say so" in found
    sub["results"]["model_info"]["dtype"] = "float32"
    assert "model_info dtype float32 but the run was given --dtype bfloat16" in " | ".join(validate_submission(sub))


# ---- 12. one line instead of a traceback ---------------------------------------------------------------------------------
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_device_cuda_without_cuda_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    code = main(["eval", "--model", "tiny-qwen2-audio", "--configs", "volume", "--source", "demo", "--limit", "1",
                 "--device", "cuda", "--out", str(tmp_path / "run"), "--no-preflight"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: --device cuda: "), err


def test_flash_attention_where_it_cannot_run_is_one_line() -> None:
    import torch

    from harness.models.base import ModelError, check_attn_implementation

    check_attn_implementation("sdpa", torch.device("cpu"))
    with pytest.raises(ModelError, match="flash_attention_2 (needs the flash-attn package|runs on CUDA GPUs only)"):
        check_attn_implementation("flash_attention_2", torch.device("cpu"))


def test_a_truncated_model_safetensors_is_named_before_loading(tmp_path: Path) -> None:
    import shutil

    from harness.models.base import ModelError
    from harness.models.hf import auto_model
    from harness.models.tiny import tiny_checkpoint

    folder = tmp_path / "ckpt"
    shutil.copytree(tiny_checkpoint("qwen2-audio"), folder)
    weights = next(folder.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ModelError, match=rf"{weights.name}: \d[\d,]* bytes but its header describes"):
        auto_model(str(folder), device="cpu")


def test_a_failed_hub_push_is_one_line_and_retried_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import requests

    import finetune.hub as hub
    from finetune.train import main

    out = tmp_path / "lora run"
    out.mkdir()
    (out / "training.json").write_text("{}")
    monkeypatch.setattr(hub, "require_token", lambda: None)

    def offline(*_a: Any, **_k: Any) -> str:
        raise requests.ConnectionError("Failed to resolve 'huggingface.co'")

    monkeypatch.setattr(hub, "push_adapter", offline)
    with pytest.raises(hub.PushFailed) as err:
        hub.publish_run(out, model_repo="org/name", results_repo=None)
    message = str(err.value)
    assert "\n" not in message and "ConnectionError: Failed to resolve 'huggingface.co'" in message
    assert f"vocalgrad-finetune push '{out}' --push-to-hub org/name" in message
    pushed: list[tuple[Path, str]] = []
    monkeypatch.setattr(hub, "push_adapter", lambda o, repo, **_k: pushed.append((Path(o), repo)) or "https://c")
    assert main(["push", str(out), "--push-to-hub", "org/name"]) == 0 and pushed == [(out, "org/name")]
    assert main(["push", str(tmp_path / "nothing"), "--push-to-hub", "org/name"]) == 2
    assert "no training.json in" in capsys.readouterr().err


# ---- 13. prompt length against the model's context -------------------------------------------------------------------------
def test_a_prompt_longer_than_the_context_is_an_item_error() -> None:
    from harness.models.base import ModelError
    from harness.models.protocol import AudioClip, Prompt
    from harness.models.registry import get_model

    lm = get_model("tiny-qwen2-audio")
    assert lm.context_length() == 4096  # the tiny checkpoint's config (harness/models/tiny.py)
    clip = AudioClip(np.zeros(16000, np.float32), 16000)
    short = Prompt(("Does the pitch rise?", clip), clip_id="short")
    long = Prompt(("Does the pitch rise? " + "and then it goes " * 2000, clip), clip_id="long")
    out = lm.generate_items([short, long], max_new_tokens=2)
    assert isinstance(out[0], str)
    assert isinstance(out[1], ModelError) and "more than the model's context of 4,096" in str(out[1])


# ---- minor ---------------------------------------------------------------------------------------------------------------
def test_a_direction_baseline_on_a_multiple_choice_config_is_refused_up_front(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    path = _bench(tmp_path / "b", [_item(i) for i in range(2)])
    code = main(["eval", "--model", "always-increase", "--dataset", str(path), "--kind", MCQ.name, "--columns", COLUMNS,
                 "--out", str(tmp_path / "run"), "--no-preflight"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "'always-increase' answers only the VocalGrad grid" in err[0], err
    assert not list((tmp_path / "run").rglob("samples_*.jsonl"))


def test_compare_names_a_truncated_samples_file(demo_run: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from harness.report import compare

    run = _copy_run(demo_run, tmp_path / "run")
    file = run / "samples_volume.jsonl"
    text = file.read_text()
    file.write_text(text[: len(text) // 2])  # cut inside a line
    compare(demo_run, run)
    assert "samples_volume.jsonl: the last line is cut off" in capsys.readouterr().err
    file.write_text(text[:40])  # not one complete line left
    with pytest.raises(ValueError, match=r"samples_volume.jsonl: no complete line"):
        compare(demo_run, run)


def test_dataset_ids_takes_the_voxparadox_configs_build_takes(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.data import ItemSource
    from vocalgrad_dataset.cli import main

    assert main(["ids", "--config", "voxparadox-pitch"]) == 0
    printed = capsys.readouterr().out.split()
    served = [cid for u in ItemSource("test").units("voxparadox-pitch") for cid in u.clip_ids]  # what eval reads
    assert printed and sorted(printed) == sorted(served)
