"""Published benchmarks as declared configs (issue 43): the VoxParadox release, MMSU, MMAU test-mini and MMAR
read in their published layouts (fixtures from our own speech: tests/helpers/published.py, NOT the real data),
the grown column map, and unaskable items skipped and reported, never guessed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main as harness
from harness.mcq import normalize_mcq_row, option_answer, option_list
from harness.metrics import mcq_summary
from harness.parsing import OptionParser, mcq_parser_id
from tests.helpers.published import (
    PLACEHOLDER_TASKS,
    lite_rows,
    mmar_folder,
    mmau_rows,
    mmsu_rows,
    placeholder_rows,
    voxparadox_release,
    write_parquet,
)
from vocalgrad_dataset.voxparadox import RELEASE_TASKS

PER_TASK = 6  # items per task in the fixtures (the pattern tasks take about a second an item to build)


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return list(lite_rows(PER_TASK))


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory, lite: list[dict[str, Any]]) -> Path:
    """All ten tasks in the release's layout (age and emotion: demo speech, placeholder labels)."""
    return voxparadox_release(tmp_path_factory.mktemp("vp") / "VoxParadox", [*lite, *placeholder_rows(PER_TASK)])


def _eval(tmp: Path, *args: str) -> tuple[int, dict[str, Any]]:
    out = tmp / "run"
    code = harness(["eval", *args, "--out", str(out), "--no-preflight"])
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    return code, results


def _chance(rows: list[dict[str, Any]]) -> float:
    """Analytic chance of a uniform answerer: the mean over tasks of the mean 1/#options (a hand computation)."""
    by_task: dict[str, list[float]] = {}
    for r in rows:
        n = sum(1 for c in "abcd" if r[f"choice_{c}"])
        by_task.setdefault(r["task_name"], []).append(1 / n)
    return sum(sum(v) / len(v) for v in by_task.values()) / len(by_task)


def test_release_random_writes_acc_ala_gap_per_task_and_macro(tmp_path: Path, release: Path,
                                                              lite: list[dict[str, Any]]) -> None:
    code, res = _eval(tmp_path, "--model", "random", "--configs", "voxparadox", "--dataset", str(release))
    assert code == 0
    tasks = [*RELEASE_TASKS.values(), *PLACEHOLDER_TASKS]
    assert sorted(res["results"]) == sorted(tasks)  # the release's ten task names, from task_name
    for task in tasks:
        assert {"acc,none", "ala,none", "ala_gap,none"} <= set(res["results"][task])
    macro = res["group_metrics"]["mcq"]
    assert macro["n_configs"] == 10 and {"acc", "ala", "ala_gap"} <= set(macro)
    chance = _chance([*lite, *placeholder_rows(PER_TASK)])
    # one seed on 60 items: a 95 % interval leaves the true mean out in 1 of 20 fixtures (lite's option order moves
    # with its builder), so the run's own standard error at 99 % (z = 2.576) checks that random is centred on chance
    assert abs(macro["acc"] - chance) <= 2.576 * macro["acc_stderr"], (macro["acc"], chance)
    assert res["config"]["split"] == "test" and res["skipped_items"] == []


def test_release_signal_oracle_reads_our_tasks(tmp_path: Path, lite: list[dict[str, Any]]) -> None:
    root = voxparadox_release(tmp_path / "vp", lite)  # the eight tasks the oracle measures
    code, res = _eval(tmp_path, "--model", "mcq-signal-oracle", "--configs", "voxparadox", "--dataset", str(root))
    assert code == 0 and res["group_metrics"]["mcq"]["acc"] >= 0.95


def test_two_adversarial_labels_count_toward_ala_for_either() -> None:
    options = ["high-medium-low", "high-low-medium", "low-high-medium", "medium-low-high"]
    row = normalize_mcq_row({"benchmark_clip_id": "r1", "audio": None, "question": "Which order?",
                             "options": options, "answer": "low-high-medium",
                             "adversarial": "high-medium-low, high-low-medium"}, "t", "fixture", kind="mcq")
    assert row["adversarial_labels"] == ["high-medium-low", "high-low-medium"]

    def sample(pred: str | None) -> dict[str, Any]:
        return {"gold": row["answer"], "pred": pred, "raw": pred, "adversarial": row["adversarial"],
                "adversarial_labels": row["adversarial_labels"], "parser": mcq_parser_id(), "options": options,
                "error": None, "mode": "generate"}

    s = mcq_summary([sample(options[0]), sample(options[1]), sample(options[2]), sample(None)])
    # by hand: both adversarial answers follow the transcript, the true one does not, unparsed is neither
    assert s["ala"] == pytest.approx(0.5) and s["acc"] == pytest.approx(0.25)


def test_a_comma_inside_one_option_is_one_label() -> None:
    options = ["low, then high", "high, then low"]
    row = normalize_mcq_row({"audio": None, "question": "q", "options": options, "answer": options[0],
                             "adversarial": "high, then low"}, "t", "fixture", kind="mcq")
    assert row["adversarial"] == "high, then low" and row["adversarial_labels"] is None


@pytest.mark.parametrize(("options", "expected"), [
    (["A. male", "B. female"], ["male", "female"]),
    (["(A) rising", "(B) falling", "(C) flat"], ["rising", "falling", "flat"]),
    (["A) one", "B) two"], ["one", "two"]),
    ('["two", "three"]', ["two", "three"]),  # MMAU: a JSON string list
    (["A cat", "B dog"], ["A cat", "B dog"]),  # a capital letter that is no printed letter stays
    (["B. one", "A. two"], ["B. one", "A. two"]),  # letters out of order: not the options' own
    (["A.", "B."], ["A.", "B."]),  # nothing after the letters: kept as they are
])  # fmt: skip
def test_printed_letters_are_stripped(options: Any, expected: list[str]) -> None:
    assert option_list(options, "fixture") == expected


@pytest.mark.parametrize("answer", ["female", "B", "(B)", "B. female", "(B) female"])
def test_answer_as_text_or_letter(answer: str) -> None:
    assert option_answer(answer, ["male", "female"], "fixture", "answer") == "female"


def test_an_unparsed_answer_is_wrong_never_guessed() -> None:
    parser = OptionParser(("male", "female"))
    assert parser.parse("I cannot tell from this recording.") is None
    row = {"gold": "male", "pred": None, "raw": "?", "adversarial": "female", "parser": mcq_parser_id(),
           "options": ["male", "female"], "error": None, "mode": "generate"}
    assert mcq_summary([row] * 5)["acc"] == 0.0


def test_mmar_unmatched_answer_is_skipped_and_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = mmar_folder(tmp_path / "MMAR", 3, unmatched=1)
    code, res = _eval(tmp_path, "--model", "random", "--configs", "mmar", "--dataset", str(root / "MMAR-meta.json"),
                      "--max-error-rate", "0.5")
    assert code == 0
    meta = json.loads((root / "MMAR-meta.json").read_text())
    assert [s["id"] for s in res["skipped_items"]] == [meta[0]["id"]]
    assert "is not one of its options" in res["skipped_items"][0]["reason"]
    assert res["n-samples"]["speech"]["effective"] == len(meta) - 1  # the rest ran
    assert f"skipped 1 item(s) that cannot be asked (first: {meta[0]['id']}" in capsys.readouterr().out
    assert res["incomplete"] is None


def test_skipped_items_count_against_max_error_rate(tmp_path: Path) -> None:
    root = mmar_folder(tmp_path / "MMAR", 2, unmatched=2)  # 2 of 4 items cannot be asked
    code, res = _eval(tmp_path, "--model", "random", "--configs", "mmar", "--dataset", str(root / "MMAR-meta.json"),
                      "--max-error-rate", "0.25")
    assert code != 0 and "2 of 4 rows are errors or skipped items" in res["incomplete"]


def test_missing_audio_file_is_skipped(tmp_path: Path) -> None:
    root = mmar_folder(tmp_path / "MMAR", 2, unmatched=0)
    meta = json.loads((root / "MMAR-meta.json").read_text())
    (root / meta[1]["audio_path"]).unlink()
    (root / meta[2]["audio_path"]).write_bytes(b"not audio")
    code, res = _eval(tmp_path, "--model", "random", "--configs", "mmar", "--dataset", str(root), "--split", "test",
                      "--max-error-rate", "0.6")
    reasons = {s["id"]: s["reason"] for s in res["skipped_items"]}
    assert code == 0 and "is missing" in reasons[meta[1]["id"]] and "unreadable" in reasons[meta[2]["id"]]


def test_mmsu_paralinguistic_only_and_per_sub_category(tmp_path: Path) -> None:
    rows = mmsu_rows(3)
    write_parquet(rows, tmp_path / "MMSU" / "train" / "0000.parquet")
    code, res = _eval(tmp_path, "--model", "random", "--configs", "mmsu-paralinguistic", "--dataset",
                      str(tmp_path / "MMSU"))
    assert code == 0 and res["config"]["split"] == "train"
    para = [r for r in rows if r["sub-category"] == "paralinguistics"]
    assert sorted(res["results"]) == sorted({r["task_name"] for r in para})  # no semantics task
    by = res["group_metrics"]["mcq"]["by_group"]
    assert {k: v["n"] for k, v in by["sub-sub-category"].items()} == {"speaker_traits": 3, "prosody": 3}
    harness(["report", str(tmp_path / "run"), "--no-figures"])
    report = (tmp_path / "run" / "report.md").read_text()
    assert "### By sub-sub-category" in report and "prosody" in report


def test_mmau_json_string_choices(tmp_path: Path) -> None:
    write_parquet(mmau_rows(3), tmp_path / "mmau" / "data" / "test_mini-00000-of-00001.parquet")
    write_parquet(mmau_rows(1)[:1], tmp_path / "mmau" / "data" / "test-00000-of-00001.parquet")  # another split
    code, res = _eval(tmp_path, "--model", "random", "--configs", "mmau-test-mini", "--dataset", str(tmp_path / "mmau"))
    assert code == 0 and list(res["results"]) == ["speech"] and res["n-samples"]["speech"]["effective"] == 6
    assert set(res["metrics"]["speech"]["by_group"]["difficulty"]) == {"easy", "medium"}


def test_reversed_controls_have_their_own_macro(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, res = _eval(tmp_path, "--model", "random", "--configs", "voxparadox-gender,voxparadox-gender-reversed",
                      "--limit", "6")
    assert code == 0
    out = capsys.readouterr().out
    assert "macro mean: mcq (1 configs)" in out and "macro mean: mcq-reversed (1 configs)" in out
    assert res["group_metrics"]["mcq"]["configs"] == ["voxparadox-gender"]
    assert res["group_metrics"]["mcq-reversed"]["configs"] == ["voxparadox-gender-reversed"]
    harness(["report", str(tmp_path / "run"), "--no-figures"])
    assert (tmp_path / "run" / "report.md").read_text().count("macro mean (1 tasks)") == 2


def test_any_split_name_for_a_mapped_dataset_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert harness(["eval", "--model", "random", "--split", "dev", "--out", str(tmp_path / "r")]) != 0
    assert "--split dev: VocalGrad's builds and generator have the splits train and test" in capsys.readouterr().err


def test_a_published_benchmark_runs_alone(tmp_path: Path, release: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert harness(["eval", "--model", "random", "--configs", "voxparadox,mmar", "--dataset", str(release),
                    "--out", str(tmp_path / "r")]) != 0
    assert "runs alone" in capsys.readouterr().err


def test_hub_copy_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lite: list[dict[str, Any]]) -> None:
    import datasets

    file = write_parquet(lite[:4], tmp_path / "hub.parquet")
    asked: list[tuple[Any, ...]] = []

    def load_dataset(path: str, name: str | None = None, *, split: str) -> Any:
        asked.append((path, name, split))
        return datasets.Dataset.from_parquet(str(file))

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    code, res = _eval(tmp_path, "--model", "random", "--configs", "voxparadox")
    assert code == 0 and asked == [("IHP-Lab/VoxParadox", None, "test")]  # the declared id and split
    assert sum(v["effective"] for v in res["n-samples"].values()) == 4


def test_where_and_hub_config_narrow_a_mapped_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    file = write_parquet(mmsu_rows(2), tmp_path / "hub.parquet")
    asked: list[tuple[Any, ...]] = []

    def load_dataset(path: str, name: str | None = None, *, split: str) -> Any:
        asked.append((path, name, split))
        return datasets.Dataset.from_parquet(str(file))

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    columns = "audio=audio,question=question,options=choice_a+choice_b+choice_c+choice_d,answer=answer_gt,task=task_name"
    code, res = _eval(tmp_path, "--model", "random", "--dataset", "org/some-benchmark", "--kind", "mcq", "--columns",
                      columns, "--split", "validation", "--hub-config", "en", "--where", "category=Reasoning|other")
    assert code == 0 and asked == [("org/some-benchmark", "en", "validation")]
    assert list(res["results"]) == ["placeholder_semantics"] and res["config"]["split"] == "validation"


def test_the_issue_command_maps_the_release_layout(tmp_path: Path, release: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The command the issue tried, on a release-shaped folder (the deprecated alias included)."""
    columns = ("audio=audio,question=question,options=choice_a+choice_b+choice_c+choice_d,answer=answer_gt,"
               "adversarial=adversarial_labels,task=task_name,id=id")
    code, res = _eval(tmp_path, "--model", "random", "--dataset", str(release), "--mcq-columns", columns)
    assert code == 0 and len(res["results"]) == 10 and res["group_metrics"]["mcq"]["n_configs"] == 10
    assert "macro mean: mcq (10 configs)" in capsys.readouterr().out


def test_a_published_config_is_not_built_here(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vocalgrad_dataset.cli import main as dataset_cli

    assert dataset_cli(["build", "--config", "mmar", "--split", "test", "--out", str(tmp_path / "b")]) != 0
    assert "'mmar' (published) is read from its own dataset, not built here" in capsys.readouterr().err


def _layout(name: str, root: Path) -> tuple[Path, dict[str, list[int]]]:
    """A fixture of one benchmark, and each task's option counts (the analytic chance, by hand)."""
    if name == "mmsu-paralinguistic":
        rows = mmsu_rows(4)
        write_parquet(rows, root / "train" / "0000.parquet")
        rows = [r for r in rows if r["sub-category"] == "paralinguistics"]
        return root, _counts([(r["task_name"], [r[f"choice_{c}"] for c in "abcd" if r[f"choice_{c}"]]) for r in rows])
    if name == "mmau-test-mini":
        rows = mmau_rows(4)
        write_parquet(rows, root / "data" / "test_mini-00000-of-00001.parquet")
        return root, _counts([(r["task"], json.loads(r["choices"])) for r in rows])
    folder = mmar_folder(root, 4, unmatched=0)
    meta = json.loads((folder / "MMAR-meta.json").read_text())
    return folder / "MMAR-meta.json", _counts([(r["modality"], r["choices"]) for r in meta])


def _counts(items: list[tuple[str, list[str]]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for task, options in items:
        out.setdefault(task, []).append(len(options))
    return out


@pytest.mark.parametrize("name", ["mmsu-paralinguistic", "mmau-test-mini", "mmar"])
def test_random_lands_on_analytic_chance(tmp_path: Path, name: str) -> None:
    data, counts = _layout(name, tmp_path / "data")
    code, res = _eval(tmp_path, "--model", "random", "--configs", name, "--dataset", str(data))
    chance = sum(sum(1 / n for n in ns) / len(ns) for ns in counts.values()) / len(counts)
    macro = res["group_metrics"]["mcq"]
    assert code == 0 and sorted(res["results"]) == sorted(counts)
    assert abs(macro["acc"] - chance) <= 2.576 * macro["acc_stderr"], (macro["acc"], chance)  # 99 %: see above


def test_signal_oracle_on_mmsu_paralinguistic(tmp_path: Path) -> None:
    data, _counts_ = _layout("mmsu-paralinguistic", tmp_path / "data")
    code, res = _eval(tmp_path, "--model", "mcq-signal-oracle", "--configs", "mmsu-paralinguistic", "--dataset",
                      str(data))
    assert code == 0 and res["group_metrics"]["mcq"]["acc"] >= 0.95


def test_a_declared_instruction_ends_the_prompt(tmp_path: Path, lite: list[dict[str, Any]]) -> None:
    from harness.mcq import ANSWER_INSTRUCTION, mcq_prompt
    from harness.published import PublishedSource
    from vocalgrad_dataset.tasks import TaskConfig, TaskDecl, resolve

    declared = resolve("voxparadox")
    said = "Reply with A, B, C or D only."
    decl = TaskDecl(file="fixture.yaml", task="fixture-bench", family=declared.family, kind=declared.kind,
                    params={**declared.params, "instruction": said})
    root = voxparadox_release(tmp_path / "vp", lite[:2])
    for config, last in ((TaskConfig("fixture-bench", decl), said), (declared, ANSWER_INSTRUCTION)):
        source = PublishedSource(config, str(root), None)
        task = source.config_names(None)[0]
        row = next(iter(source.rows(task, source.units(task))))
        prompt, _vocab = mcq_prompt(row, None)
        assert next(s for s in prompt.segments if isinstance(s, str)).endswith(f"\n\n{last}")


def test_mmsu_audio_folder_layout(tmp_path: Path) -> None:
    from tests.helpers.published import mmsu_audiofolder

    root = mmsu_audiofolder(tmp_path / "MMSU", 2)
    code, res = _eval(tmp_path, "--model", "random", "--configs", "mmsu", "--dataset", str(root))
    assert code == 0 and res["skipped_items"] == []
    assert sum(v["effective"] for v in res["n-samples"].values()) == 6  # gender, pitch and semantics: 2 each


def test_a_run_counts_either_of_two_adversarial_labels(tmp_path: Path, lite: list[dict[str, Any]]) -> None:
    """End to end on the release layout: vocal-range items with two adversarial labels ("x, y", as the project
    page's example); a model answering the second label of each has ALA 1 and GT 0."""
    from harness.models.baselines import LabelBaseline
    from harness.runner import EvalSettings, run_eval

    rows = []
    for r in (r for r in lite if r["task_name"] == "vocal_range_comparison"):
        options = [r[f"choice_{c}"] for c in "abcd" if r[f"choice_{c}"]]
        second = next(o for o in options if o not in (r["answer_gt"], r["adversarial_labels"]))
        rows.append({**r, "adversarial_labels": f"{r['adversarial_labels']}, {second}"})
    seconds = {r["question"] + r["id"]: r["adversarial_labels"].split(", ")[1] for r in rows}

    class SecondLabel(LabelBaseline):
        def decide(self, prompt: Any) -> tuple[str, float]:
            return next(v for k, v in seconds.items() if k.endswith(prompt.clip_id)), 1.0

    root = voxparadox_release(tmp_path / "vp", rows)
    run_eval(EvalSettings("second-label", ["voxparadox"], str(tmp_path / "run"), dataset=str(root), split=None,
                          preflight=False), model=SecondLabel("second-label"))
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    metrics = res["metrics"]["vocal_range_comparison"]
    assert metrics["n"] == len(rows) and metrics["ala"] == 1.0 and metrics["acc"] == 0.0
