"""`harness export lmms-eval`: the task folder scores fixed answers (one unparsable, one ambiguous) exactly as
`harness report` does, and lmms-eval's own task loader reads it.

lmms-eval pulls CUDA torchvision and cannot live in .venv: scripts/setup.sh installs it on its own into
.extras/lmms-eval (`pip install --no-deps --target`, with loguru, pytz, tenacity, sacrebleu, portalocker, tabulate
and lxml; VOCALGRAD_LMMS_EVAL_PATH names another such folder), and the exported folder is loaded by lmms-eval's
TaskManager and scored through its ConfigurableTask; without it, that test is skipped and the rest load the YAML and utils.py as lmms-eval does
(PyYAML with its `!function` tag, utils.py imported from the folder).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from harness.cli import main as harness_cli
from harness.models.base import BaseAudioLM
from harness.models.protocol import ModelError, Prompt
from harness.report import compute
from harness.runner import EvalSettings, run_eval
from tests.helpers.folder_source import fbuild, tiny_folder

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ("increase", "It clearly decreases? No: decrease.", "I cannot tell from this clip.",
           "increase or decrease", "Decrease")


def answer_for(clip_id: str) -> str:
    """A fixed answer per clip: parsed ones, an unparsable one and an ambiguous one (both families)."""
    return ANSWERS[int(hashlib.sha256(clip_id.encode()).hexdigest(), 16) % len(ANSWERS)]


class Fixed(BaseAudioLM):
    def __init__(self) -> None:
        super().__init__("fixed", batch_size=8)

    def generate_items(self, prompts: list[Prompt], *, max_new_tokens: int = 128) -> list[str | ModelError]:
        return [answer_for(p.clip_id) for p in prompts]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("built")
    fbuild(tiny_folder(root / "src", n=1), root / "C", clips_per_shard=1)  # volume: 24 rows
    return root / "C"


@pytest.fixture(scope="module")
def exported(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tasks")
    assert harness_cli(["export", "lmms-eval", "--configs", "volume", "--dataset", str(built), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def run(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run")
    run_eval(EvalSettings("fixed", ["volume"], str(out), dataset=str(built), preflight=False, retry_max_new_tokens=0),
             model=Fixed())
    return out


class _Loader(yaml.SafeLoader):
    """PyYAML with lmms-eval's `!function module.name` tag (resolved against the YAML's folder)."""


def _function(loader: _Loader, node: yaml.Node) -> str:
    return f"!function {loader.construct_scalar(node)}"


_Loader.add_constructor("!function", _function)


def _utils(folder: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("vocalgrad_lmms_utils", folder / "utils.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fn(module: ModuleType, ref: str) -> Any:
    assert ref.startswith("!function utils."), ref
    return getattr(module, ref.removeprefix("!function utils."))


def test_the_folder_scores_like_harness_report(exported: Path, run: Path) -> None:
    rows = [json.loads(line) for line in (run / "samples_volume.jsonl").read_text().splitlines()]
    raws = {r["raw"] for r in rows}
    assert "I cannot tell from this clip." in raws and "increase or decrease" in raws  # unparsable, ambiguous
    task = yaml.load((exported / "vocalgrad_volume.yaml").read_text(), Loader=_Loader)
    group = yaml.load((exported / "vocalgrad.yaml").read_text(), Loader=_Loader)
    assert group["task"] == ["vocalgrad_volume"] and group["aggregate_metric_list"][0]["weight_by_size"] is False
    utils = _utils(exported)
    process = _fn(utils, task["process_results"])
    metrics = {m["metric"]: _fn(utils, m["aggregation"]) for m in task["metric_list"]}
    # the documents lmms-eval reads: the Parquet rows the YAML names (label, clip id)
    datasets = pytest.importorskip("datasets")
    docs = datasets.load_dataset(task["dataset_path"], data_files=task["dataset_kwargs"]["data_files"],
                                 split=task["test_split"]).remove_columns(["audio"])
    by_id = {d["benchmark_clip_id"]: d for d in docs}
    scored = [process(by_id[r["benchmark_clip_id"]], [r["raw"]]) for r in rows]
    report = compute(run)["metrics"]["volume"]
    assert metrics["accuracy"]([s["accuracy"] for s in scored]) == pytest.approx(report["accuracy"])
    assert metrics["parsed"]([s["parsed"] for s in scored]) == pytest.approx(report["n_parsed"] / report["n"])
    text = _fn(utils, task["doc_to_text"])(by_id[rows[0]["benchmark_clip_id"]], task["lmms_eval_specific_kwargs"]["default"])
    assert text + "<audio>" == rows[0]["prompt"]  # our question; the audio goes where the model wrapper puts it


def test_row_level_kinds_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert harness_cli(["export", "lmms-eval", "--configs", "voxparadox-pitch", "--out", str(tmp_path)]) != 0
    assert "asks per row" in capsys.readouterr().err


def test_lmms_evals_task_loader_runs_the_folder(exported: Path, run: Path) -> None:
    # scripts/setup.sh installs lmms-eval apart from .venv into .extras/ (its CUDA torchvision never loads here)
    where = os.environ.get("VOCALGRAD_LMMS_EVAL_PATH") or str(ROOT / ".extras" / "lmms-eval")
    if not (Path(where) / "lmms_eval").is_dir():
        pytest.skip(f"no lmms-eval installed apart at {where} (scripts/setup.sh installs it)")
    sys.path.insert(0, where)
    try:
        from lmms_eval.tasks import TaskManager, get_task_dict

        manager = TaskManager(include_path=str(exported), include_defaults=False)
        assert "vocalgrad_volume" in manager.all_tasks and "vocalgrad" in manager.all_tasks
        (tasks,) = get_task_dict(["vocalgrad"], manager).values()
        task = tasks["vocalgrad_volume"]
    finally:
        sys.path.remove(where)
    rows = {r["benchmark_clip_id"]: r for r in map(json.loads, (run / "samples_volume.jsonl").read_text().splitlines())}
    docs = list(task.test_docs())
    assert len(docs) == len(rows) == 24
    audio = task.doc_to_visual(docs[0])[0]
    assert audio["sampling_rate"] > 0 and audio["array"].ndim == 1 and len(audio["array"]) > 0
    assert task.doc_to_text(docs[0]) + "<audio>" == rows[docs[0]["benchmark_clip_id"]]["prompt"]
    scored = [task.process_results(d, [rows[d["benchmark_clip_id"]]["raw"]]) for d in docs]
    accuracy = task.aggregation()["accuracy"]([s["accuracy"] for s in scored])
    assert accuracy == pytest.approx(compute(run)["metrics"]["volume"]["accuracy"])
