"""Every samples line carries lm-evaluation-harness's per-sample keys, with the values lm-eval would write.

lm-eval cannot be installed beside transformers 5, so its writer's code path is restated here from its source
(lm-eval 0.4.x): lm_eval/evaluator.py `evaluate()` builds each logged sample from the task's requests
(a generate_until request's args are (context, gen_kwargs); its resps the generated strings; the default
filter "none" is take_first), and lm_eval/loggers/evaluation_tracker.py `save_results_samples()` flattens
`arguments` to {"gen_args_i": {"arg_j": ...}}, turns resps and filtered_resps into strings (sanitize_list),
`target` into str and dumps the line with ensure_ascii=False; `hash_string` (lm_eval/utils.py) is the sha256 hex
of the UTF-8 string. With VOCALGRAD_LM_EVAL_SRC naming a folder that holds lm-eval's unpacked `lm_eval/`
package (e.g. from `pip download lm-eval --no-deps` and unzip), lm-eval's own utils and its SampleResult
schema are loaded from there and checked too.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from harness import results as res
from harness.models.base import BaseAudioLM
from harness.models.protocol import ModelError, Prompt
from harness.runner import EvalSettings, run_eval

LM_EVAL_KEYS = ("doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics", "doc_hash",
                "prompt_hash", "target_hash")
OWN_KEYS = ("benchmark_clip_id", "category", "gold", "pred", "raw", "parsed", "margin", "prompt", "prompt_variant",
            "answer_words", "parser", "tier", "curve", "direction", "source_clip_id", "error", "retried", "model", "mode")


class Scripted(BaseAudioLM):
    """Answers by clip: a plain word, a non-ASCII sentence, an unparsed answer fixed by the retry, an error."""

    def __init__(self) -> None:
        super().__init__("scripted", batch_size=8)

    def generate_items(self, prompts: list[Prompt], *, max_new_tokens: int = 128) -> list[str | ModelError]:
        out: list[str | ModelError] = []
        for p in prompts:
            case = int(hashlib.sha256(p.clip_id.encode()).hexdigest(), 16) % 4
            if case == 3:
                out.append(ModelError("server said no", p.clip_id))
            elif case == 2:
                out.append("decrease" if max_new_tokens > 128 else "hmm, hard to say")
            else:
                out.append("increase" if case == 0 else "Die Tonhöhe — increase ✓")
        return out


# ---- lm-eval's writer, restated from its source -------------------------------------------------------------
def hash_string(string: str) -> str:
    return hashlib.sha256(string.encode("utf-8")).hexdigest()


def handle_non_serializable(o: Any) -> Any:
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    return list(o) if isinstance(o, set) else str(o)


def sanitize_list(sub: Any) -> Any:
    if isinstance(sub, list):
        return [sanitize_list(x) for x in sub]
    if isinstance(sub, tuple):
        return tuple(sanitize_list(x) for x in sub)
    return str(sub)


def lm_eval_line(doc_id: int, doc: dict, context: str, gen_kwargs: dict, response: str, target: str,
                 metrics: dict[str, float], hashing: Any = hash_string, sanitize: Any = sanitize_list) -> dict:
    """The samples line lm-eval writes for one generate_until document with one request and one repeat."""
    args = (context, gen_kwargs)  # Instance.args of a generate_until request
    resps = [response]  # one repeat
    filtered = resps[0]  # the "none" filter: take_first
    example = {
        "doc_id": doc_id, "doc": doc, "target": target, "arguments": [args], "resps": [resps],
        "filtered_resps": [filtered], "filter": "none", "metrics": list(metrics),
        "doc_hash": hashing(json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False)),
        "prompt_hash": hashing(args[0]), "target_hash": hashing(str(target)),
    }
    example.update(metrics)
    arguments = {f"gen_args_{i}": {f"arg_{j}": a for j, a in enumerate(arg)} for i, arg in enumerate(example["arguments"])}
    example.update(resps=sanitize(example["resps"]), filtered_resps=sanitize(example["filtered_resps"]),
                   arguments=arguments, target=str(example["target"]))
    return json.loads(json.dumps(example, default=handle_non_serializable, ensure_ascii=False))


def _expected(line: dict, doc_id: int, budgets: tuple[int, int], **lm_eval: Any) -> dict:
    """What lm-eval writes for the same document, prompt and answer as `line`."""
    doc = {k: line[k] for k in ("benchmark_clip_id", "category", "gold", "tier", "curve", "direction", "source_clip_id")}
    answer = "" if line["error"] else line["raw"]
    correct = float(line["error"] is None and line["pred"] == line["gold"])
    budget = budgets[1] if line["retried"] else budgets[0]
    return lm_eval_line(doc_id, doc, line["prompt"], {"max_gen_toks": budget}, answer, line["gold"],
                        {"accuracy": correct}, **lm_eval)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run")
    settings = EvalSettings("scripted", ["pitch"], str(out), source="demo", batch_size=8, preflight=False,
                            max_error_rate=1.0)
    run_eval(settings, model=Scripted())
    return out


def _lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in res.samples_path(run, "pitch").read_text(encoding="utf-8").splitlines()]


def test_every_line_has_lm_evals_keys_with_lm_evals_values(run: Path) -> None:
    lines = _lines(run)
    assert len(lines) == 72 and {"" if ln["error"] else "ok" for ln in lines} == {"", "ok"}
    assert any(ln["retried"] and ln["pred"] == "decrease" for ln in lines)
    assert any(not ln["raw"].isascii() for ln in lines if ln["raw"])
    for i, line in enumerate(lines):  # unlimited: doc_id enumerates the documents as lm-eval does
        assert all(k in line for k in OWN_KEYS)  # our own fields stay
        want = _expected(line, i, (128, 256))
        got = {k: line[k] for k in (*LM_EVAL_KEYS, "accuracy")}
        assert got == want, line["benchmark_clip_id"]


def test_limited_run_keeps_each_clips_index(run: Path, tmp_path: Path) -> None:
    full = {ln["benchmark_clip_id"]: ln["doc_id"] for ln in _lines(run)}
    settings = EvalSettings("scripted", ["pitch"], str(tmp_path), source="demo", batch_size=8, preflight=False,
                            max_error_rate=1.0, limit=5, max_new_tokens=64, retry_max_new_tokens=100)
    run_eval(settings, model=Scripted())
    lines = _lines(tmp_path)
    assert len(lines) == 5
    for line in lines:  # the same document keeps its id and hash in every run; the budgets are this run's
        assert line["doc_id"] == full[line["benchmark_clip_id"]]
        assert {k: line[k] for k in LM_EVAL_KEYS} == {k: v for k, v in _expected(
            line, line["doc_id"], (64, 100)).items() if k in LM_EVAL_KEYS}


def test_datasets_json_loader_reads_the_lines(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-eval publishes samples files as a JSON dataset (its metadata card: load_dataset on samples_*.jsonl)."""
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    data = datasets.load_dataset("json", data_files=str(res.samples_path(run, "pitch")), split="train",
                                 cache_dir=str(tmp_path / "cache"))
    lines = _lines(run)
    assert data["doc_id"] == [ln["doc_id"] for ln in lines]
    assert data["filtered_resps"] == [ln["filtered_resps"] for ln in lines]
    assert data[0]["arguments"]["gen_args_0"]["arg_0"] == lines[0]["prompt"]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_against_lm_evals_own_utils_and_schema(run: Path) -> None:
    # scripts/setup.sh installs lm-eval apart from .venv (it needs transformers 4): only files are read from it
    src = os.environ.get("VOCALGRAD_LM_EVAL_SRC") or str(Path(__file__).resolve().parents[1] / ".extras" / "lm-eval")
    if not (Path(src) / "lm_eval" / "utils.py").is_file():
        pytest.skip(f"no lm-eval unpacked at {src} (scripts/setup.sh installs it apart from .venv)")
    utils = _load("lm_eval_utils_for_test", Path(src) / "lm_eval" / "utils.py")
    schema = _load("lm_eval_result_schema_for_test", Path(src) / "lm_eval" / "result_schema.py")
    for i, line in enumerate(_lines(run)):
        assert schema.SampleResult.__required_keys__ <= set(line)
        want = _expected(line, i, (128, 256), hashing=utils.hash_string, sanitize=utils.sanitize_list)
        assert {k: line[k] for k in (*LM_EVAL_KEYS, "accuracy")} == want
