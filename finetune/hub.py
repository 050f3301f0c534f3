"""Publishing: an adapter to a model repo, evaluation runs to a results dataset repo.

Tokens come only from the environment (HF_TOKEN) or `hf auth login`; nothing here reads, prints or writes
one. Each push first stages the exact repository layout in a local directory (what the offline tests
inspect) and then uploads that directory in one commit.

Model repo:   adapter_config.json, adapter_model.safetensors (LoRA tensors only), README.md (the card),
              .eval_results/vocalgrad.yaml, cross_category.{png,md,csv}, training.json, train_log.jsonl
Results repo: <config>/results.json and <config>/samples_<category>.jsonl per model x prompt variant x mode,
              README.md whose `configs:` lists every config, so `load_dataset(REPO, CONFIG)` reads its samples.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import huggingface_hub
from huggingface_hub.errors import RepositoryNotFoundError

from finetune.card import EVAL_RESULTS_FILE, write_card
from finetune.settings import ADAPTER_DIR, EVAL_DIR, TRAINING_JSON
from harness.data import CONFIGS
from harness.models.pclm import LM_WEIGHTS, PCLM_CONFIG, PCLM_WEIGHTS, PROTOCOL_FILE
from harness.results import atomic_write_text, read_results, samples_path

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
PCLM_FILES = (PCLM_CONFIG, PCLM_WEIGHTS, LM_WEIGHTS, PROTOCOL_FILE)
EXTRA_FILES = ("cross_category.png", "cross_category.md", "cross_category.csv", "training.json", "train_log.jsonl")


def require_token() -> None:
    """Raise a clear error when no Hugging Face token is configured (the token itself is never shown)."""
    if not huggingface_hub.get_token():
        raise ValueError("no Hugging Face token: set HF_TOKEN or run `hf auth login` before pushing")


def _check_adapter_only(path: Path) -> None:
    """Refuse to upload an adapter file that carries base weights (e.g. a copied lm_head or embeddings)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        base = [k for k in fh.keys() if "lora_" not in k]  # noqa: SIM118 - safe_open is not iterable
    if base:
        raise ValueError(f"{path} holds non-LoRA tensors ({', '.join(base[:3])}); refusing to upload base weights")


def stage_adapter(out_dir: str | Path, stage_dir: str | Path, *, repo_id: str,
                  dataset_repo: str = "ynklab/vocalgrad") -> list[str]:
    """Write the model repo exactly as it will be uploaded; returns its files (relative, sorted)."""
    out, stage = Path(out_dir), Path(stage_dir)
    training = out / TRAINING_JSON
    if not training.is_file():
        raise FileNotFoundError(f"{out} has no {TRAINING_JSON}: train first (vocalgrad-finetune --out {out} ...)")
    info = json.loads(training.read_text(encoding="utf-8"))
    for name in ADAPTER_FILES:
        src = out / ADAPTER_DIR / name
        if not src.is_file():
            raise FileNotFoundError(f"missing {src}")
        shutil.copyfile(src, stage / name)
    _check_adapter_only(stage / "adapter_model.safetensors")
    for name in PCLM_FILES:  # the prompt-conditioned layer mixer travels with its LoRA (--method pclm)
        if (out / ADAPTER_DIR / name).is_file():
            shutil.copyfile(out / ADAPTER_DIR / name, stage / name)
    for name in EXTRA_FILES:
        if (out / name).is_file():
            shutil.copyfile(out / name, stage / name)
    write_card(out, info, dataset_repo=dataset_repo, repo_id=repo_id, dest=stage)
    return sorted(str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file())


def push_adapter(out_dir: str | Path, repo_id: str, *, private: bool = False,
                 dataset_repo: str = "ynklab/vocalgrad") -> str:
    """Create (if needed) and upload the model repo of a finished training run; returns the commit URL."""
    require_token()
    info = json.loads((Path(out_dir) / TRAINING_JSON).read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="vocalgrad-adapter-") as tmp:
        stage_adapter(out_dir, tmp, repo_id=repo_id, dataset_repo=dataset_repo)
        api = huggingface_hub.HfApi()
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        commit = api.upload_folder(
            folder_path=tmp, repo_id=repo_id, repo_type="model",
            commit_message=f"VocalGrad LoRA adapter ({info['lora']['scope']}, {info['data']['config']})",
        )
    return str(getattr(commit, "commit_url", commit))


# ---- results dataset ----------------------------------------------------------------------------------------
def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


def results_config_name(results: Mapping[str, Any]) -> str:
    """`model--variant--mode` of a results.json, the adapter (if any) named in the model part."""
    cfg = results["config"]
    model, variant, mode = cfg["model"], cfg["prompt_variant"], cfg["mode"]
    adapter = (cfg.get("model_args") or {}).get("adapter")
    if adapter:
        model = f"{model}+{_adapter_label(adapter)}"
    return "--".join(_safe(x) for x in (model, variant, mode))


def _adapter_label(adapter: str) -> str:
    """A short name for an adapter: its training category and scope when it is a training run's adapter/."""
    path = Path(adapter)
    training = path.parent / "training.json"
    if path.name == "adapter" and training.is_file():
        info = json.loads(training.read_text(encoding="utf-8"))
        return f"lora-{info['lora']['scope']}-{info['data']['config']}"
    return adapter if "/" in adapter and not path.exists() else path.name


def results_card(configs: Iterable[str]) -> str:
    """README.md of the results repo: one `configs:` entry per evaluated model x variant x mode."""
    names = sorted(set(configs))
    lines = ["---", "configs:"]
    for name in names:
        lines += [f"- config_name: {name}", "  data_files:", "  - split: test", f'    path: "{name}/samples_*.jsonl"']
    lines += ["---", "", "# VocalGrad evaluation results", "",
              "One config per model x prompt variant x scoring mode, written by the VocalGrad harness: "
              "`<config>/results.json` (metrics, versions, run settings) and `<config>/samples_<category>.jsonl` "
              "(one line per clip: raw answer, parsed prediction, gold label). Load one with "
              "`datasets.load_dataset(REPO, CONFIG)`.", "", "| config |", "|---|"]
    lines += [f"| `{n}` |" for n in names]
    return "\n".join(lines) + "\n"


def stage_results(run_dir: str | Path, stage_dir: str | Path, *, config_name: str | None = None,
                  existing: Iterable[str] = ()) -> list[str]:
    """Write one evaluation run as a results-repo config (plus the README listing every config)."""
    run, stage = Path(run_dir), Path(stage_dir)
    results = read_results(run, "an evaluation run directory is needed")
    name = config_name or results_config_name(results)
    (stage / name).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run / "results.json", stage / name / "results.json")
    configs = [c for c in CONFIGS if c in results["results"]] + sorted(set(results["results"]) - set(CONFIGS))
    for c in configs:
        src = samples_path(run, c)
        if not src.is_file():
            raise FileNotFoundError(f"results.json lists {c} but {src} is missing")
        shutil.copyfile(src, stage / name / src.name)
    atomic_write_text(stage / "README.md", results_card([*existing, name]))
    return sorted(str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file())


def existing_configs(repo_id: str) -> list[str]:
    """Configs already in a results repo (folders holding results.json); none when the repo does not exist."""
    try:
        files = huggingface_hub.HfApi().list_repo_files(repo_id, repo_type="dataset")
    except RepositoryNotFoundError:
        return []
    return sorted({f.split("/")[0] for f in files if f.count("/") == 1 and f.endswith("/results.json")})


def push_results(run_dir: str | Path, repo_id: str, *, config_name: str | None = None, private: bool = False) -> str:
    """Upload an evaluation run as one config of a results dataset repo (through the dataset build's push)."""
    from vocalgrad_dataset.build.export import push_to_hub

    require_token()
    with tempfile.TemporaryDirectory(prefix="vocalgrad-results-") as tmp:
        stage_results(run_dir, tmp, config_name=config_name, existing=existing_configs(repo_id))
        return push_to_hub(tmp, repo_id, private=private)


def publish_run(out_dir: str | Path, *, model_repo: str | None, results_repo: str | None, private: bool = False,
                dataset_repo: str = "ynklab/vocalgrad") -> None:
    """The pushes a finished run asks for: the adapter to its model repo, and its evaluation (when there is
    one) to the results repo; prints each commit URL."""
    out = Path(out_dir)
    if not (out / TRAINING_JSON).is_file():
        raise FileNotFoundError(f"no {TRAINING_JSON} in {out}: push takes the folder of a finished training run")
    retry = push_command(out, model_repo, results_repo, private, dataset_repo)
    try:
        if model_repo:
            print("pushed adapter:", push_adapter(out, model_repo, private=private, dataset_repo=dataset_repo))
        if results_repo and (out / EVAL_DIR / "results.json").is_file():
            print("pushed results:", push_results(out / EVAL_DIR, results_repo))
    except (ValueError, FileNotFoundError):  # our own refusals (no token, base weights in the adapter): as they are
        raise
    except Exception as err:  # noqa: BLE001 - offline, DNS, timeouts, 5xx: the HTTP stacks raise many types
        reason = " ".join(str(err).split())[:200] or type(err).__name__
        raise PushFailed(f"push to the Hub failed ({type(err).__name__}: {reason}); the run in {out} is complete "
                         f"and kept: retry the push alone with `{retry}`") from None


class PushFailed(ValueError):
    """A finished run whose push did not reach the Hub; the message says how to retry it alone."""


def push_command(out: Path, model_repo: str | None, results_repo: str | None, private: bool,
                 dataset_repo: str) -> str:
    """The `vocalgrad-finetune push` command line that retries a run's push on its own."""
    import shlex

    parts = ["vocalgrad-finetune", "push", str(out)]
    parts += ["--push-to-hub", model_repo] if model_repo else []
    parts += ["--results-repo", results_repo] if results_repo else []
    parts += ["--hub-private"] if private else []
    parts += ["--dataset-repo", dataset_repo] if dataset_repo != "ynklab/vocalgrad" else []
    return shlex.join(parts)


def push_main(argv: list[str]) -> int:
    """`vocalgrad-finetune push OUT --push-to-hub ORG/NAME [--results-repo ORG/NAME]`: the push of a finished
    run alone (after a failed one: training and evaluation are not run again)."""
    import argparse

    p = argparse.ArgumentParser(prog="vocalgrad-finetune push", description=push_main.__doc__)
    p.add_argument("out", help="the output folder of a finished vocalgrad-finetune run")
    p.add_argument("--push-to-hub", default=None, metavar="ORG/NAME", help="model repo for the adapter")
    p.add_argument("--results-repo", default=None, metavar="ORG/NAME", help="results dataset repo")
    p.add_argument("--hub-private", action="store_true", help="create the repos private")
    p.add_argument("--dataset-repo", default="ynklab/vocalgrad", help="benchmark dataset id named in .eval_results")
    ns = p.parse_args(argv)
    if not (ns.push_to_hub or ns.results_repo):
        p.error("nothing to push: give --push-to-hub and/or --results-repo")
    require_token()
    publish_run(ns.out, model_repo=ns.push_to_hub, results_repo=ns.results_repo, private=ns.hub_private,
                dataset_repo=ns.dataset_repo)
    return 0


__all__ = ["EVAL_RESULTS_FILE", "PushFailed", "publish_run", "push_command", "push_main", "push_adapter", "push_results", "require_token",
           "results_config_name", "stage_adapter", "stage_results"]
