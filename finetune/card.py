"""The adapter's model card (README.md) and its `.eval_results/vocalgrad.yaml` (the Hub's eval-results format).

Both are pure functions of a training directory's training.json and eval/results.json, so the card on the
Hub always says exactly what the uploaded adapter was trained on and scored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from harness.data import CONFIGS, PUBLISHED_NAME, attribute_word
from harness.results import atomic_write_text, component_versions, group_metrics, task_metrics
from harness.tables import markdown_table, pct

EVAL_RESULTS_FILE = ".eval_results/vocalgrad.yaml"


def is_official(source: str) -> bool:
    """True for results on the official VCTK-based benchmark (generated from VCTK or a build/release of it)."""
    return source == "generate:vctk" or source.startswith(("parquet:", "release:"))


def load_results(out_dir: str | Path) -> dict[str, Any] | None:
    """The adapter's evaluation (eval/results.json of a training directory), if it ran."""
    path = Path(out_dir) / "eval" / "results.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def eval_results_entries(info: Mapping[str, Any], results: Mapping[str, Any], *, dataset_repo: str,
                         repo_id: str | None = None) -> list[dict[str, Any]]:
    """One entry per evaluated config (accuracy % over all clips), plus the nine-category mean when complete."""
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    cfg = results["config"]
    source = str(cfg.get("source", ""))
    notes = (f"LoRA {info['lora']['scope']} trained on {info['data']['config']}; {cfg.get('mode')} scoring, "
             f"prompt {cfg.get('prompt_variant')}; source {source}")
    source_kw = {"source_url": f"https://huggingface.co/{repo_id}", "source_name": "VocalGrad harness"} if repo_id else {}
    entries = [
        EvalResultEntry(dataset_id=dataset_repo, task_id=PUBLISHED_NAME[c], value=round(100 * r["accuracy"], 2),
                        date=results.get("date"), notes=notes, **source_kw)
        for c, r in task_metrics(results).items() if r.get("accuracy") is not None and c in PUBLISHED_NAME
    ]
    group = group_metrics(results)
    if group.get("complete") and group.get("accuracy") is not None:
        entries.append(EvalResultEntry(dataset_id=dataset_repo, task_id="all", value=round(100 * group["accuracy"], 2),
                                       date=results.get("date"), notes=notes + "; mean of the nine categories",
                                       **source_kw))
    return eval_result_entries_to_yaml(entries)


def eval_results_yaml(info: Mapping[str, Any], results: Mapping[str, Any], *, dataset_repo: str,
                      repo_id: str | None = None) -> str:
    """The text of `.eval_results/vocalgrad.yaml`."""
    entries = eval_results_entries(info, results, dataset_repo=dataset_repo, repo_id=repo_id)
    return yaml.safe_dump(entries, sort_keys=False, allow_unicode=True)


def _num(x: Any, fmt: str = "{:.4f}") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def method_words(info: Mapping[str, Any]) -> str:
    """"LoRA", "PCLM + LoRA" or "PCLM + DPO (LoRA)": what the adapter is, for the title."""
    pclm, objective = info.get("pclm"), info.get("objective", "ce")
    llm = "full LLM" if (info.get("llm_training") or {}).get("mode") == "full" else "LoRA"
    if objective == "dpo":
        return f"PCLM + DPO ({llm})" if pclm else f"DPO ({llm})"
    return f"PCLM + {llm}" if pclm else llm


def _kind_metric_tables(info: Mapping[str, Any]) -> list[str]:
    """Per config with metrics of its own kind (MCQ: acc = GT accuracy, ala, ala_gap), one row per evaluated
    model (the base model first when it was evaluated), with the paired test against the base model."""
    evaluation = info.get("eval") or {}
    by_model: Mapping[str, Mapping[str, Mapping[str, Any]]] = evaluation.get("kind_metrics") or {}
    paired = evaluation.get("paired_vs_base") or {}
    parts: list[str] = []
    for config in sorted({c for metrics in by_model.values() for c in metrics}):
        names = [k for k in next(m[config] for m in by_model.values() if config in m)
                 if k != "n" and not k.endswith(("_ci_low", "_ci_high"))]
        rows = [[label, *(pct(m[config].get(n)) for n in names)] for label, m in by_model.items() if config in m]
        parts.append(f"`{config}` (%):\n\n" + markdown_table(["model", *names], rows))
        if config in paired:
            t = paired[config]
            parts.append(f"Paired against the base model (exact McNemar, {t['n_pairs']} items): only base right "
                         f"{t['only_a_correct']}, only adapter right {t['only_b_correct']}, p = {t['p_value']:.4g}.")
    return parts


def _what_it_learns(data: Mapping[str, Any]) -> str:
    """What the adapter is trained to tell, from the training data's config(s)."""
    if "mixture" in data:
        return "to answer the configs " + ", ".join(f"`{p['config']}`" for p in data["mixture"]) + " from the audio"
    if "kind" in data:
        return f"to answer `{data['config']}` items of `{data['source']}` ({data['kind']}) from the audio"
    if "builder_version" in data:  # multiple-choice items (VoxParadox-lite)
        return (f"to answer VoxParadox-lite `{data['config']}` items from the audio, not from what the words "
                "claim (multiple choice, lettered options)")
    return (f"to tell whether the **{attribute_word(data['config'])}** of speech increases or decreases over "
            "time (VocalGrad, Ryu & Yanaka 2026)")


def _data_text(data: Mapping[str, Any], seed: int) -> str:
    """The data paragraph: which split and source, how many clips trained and were held out (per config of a
    mixture, with its weight)."""
    if "mixture" in data:
        shared = {k: data[k] for k in ("split", "val_fraction") if k in data}
        return "A mixture of configs, each with its weight (its share of an epoch):\n\n" + "\n\n".join(
            f"- weight {p['weight']:g} ({p['per_epoch']:,} per epoch): " + _data_text({**shared, **p}, seed)
            for p in data["mixture"])
    category = data["config"]
    if "kind" in data:  # a foreign dataset mapped onto a task kind (--dataset --kind --columns)
        return (f"Task `{category}` of `{data['source']}`, its `{data['split']}` split mapped onto the task kind "
                f"`{data['kind']}`: {data['n_train']:,} training items, {data['n_val']:,} held out for validation "
                f"(each with probability {data['val_fraction']:g}, by a hash of seed {seed} and its id).")
    if "builder_version" in data:
        return (f"VoxParadox-lite config `{category}`, `{data['split']}` split built from the vendored base "
                f"utterances by builder version {data['builder_version']}: {data['n_train']:,} training items, "
                f"{data['n_val']:,} held out for validation (each with probability {data['val_fraction']:g}, by "
                f"a hash of seed {seed} and its id). Train ids sha256 `{data['train_ids_sha256'][:16]}…`.")
    published = PUBLISHED_NAME.get(category, category)  # a -conflict config has no published name of its own
    return (f"VocalGrad config `{category}` ({published}), `{data['split']}` split generated on the "
            f"fly from source `{data['source']}` by generator version {data['generator_version']}: "
            f"{data['n_train']:,} training clips ({data['n_train_increase']:,} 'increase'), {data['n_val']:,} held "
            f"out for validation ({100 * data['val_fraction']:g} % of the split, stratified by label, seed {seed}). "
            f"Train ids sha256 `{data['train_ids_sha256'][:16]}…`.")


def _repair_rows(info: Mapping[str, Any]) -> list[list[str]]:
    """Recipe rows for the prompt-conditioned layer mixer and DPO (none for a plain LoRA run)."""
    rows = []
    if (pclm := info.get("pclm")) is not None:
        rows.append(["PCLM", f"encoder layers {pclm['taps']} + final ({pclm['n_layers']}) mixed by alpha = softmax(MLP("
                     f"prompt embedding)), MLP width {pclm['hidden']}; prompt embedding: {pclm['prompt_embedding']}; "
                     f"{pclm['added_params']:,} added parameters ({100 * pclm['added_share']:.3g} % of the model); "
                     f"stage 1 (mixer only, LM frozen): {pclm['stage1_steps']} steps"])
    if (dpo := info.get("dpo")) is not None:
        rows.append(["DPO", f"beta {dpo['beta']:g}, rejected answer: {dpo['rejected']}; reference: {dpo['reference']}; "
                     f"first DPO step loss {_num(dpo.get('first_dpo_loss'))}"])
    for stage in info.get("stages") or []:
        trains = " + ".join(stage.get("trains") or []) or "?"
        rows.append([f"stage `{stage['name']}`", f"{stage['objective']}, trains {trains} "
                     f"({stage.get('n_trainable_params', '?')} tensors), lr {stage['lr']:g}, {stage['steps']} steps "
                     f"on {stage.get('data', {}).get('config', '?')}"])
    if info.get("not_paper_protocol"):
        rows.append(["‡ not the paper's protocol", "; ".join(info["not_paper_protocol"])])
    return rows


def _rates(info: Mapping[str, Any]) -> str:
    """The learning rate, or each stage's ("5e-05 / 5e-05 / 5e-07")."""
    stages = info.get("stages") or []
    if stages:
        return " / ".join(f"{s['lr']:g}" for s in stages)
    lr = info["settings"].get("lr")
    return f"{lr:g}" if lr is not None else "?"


def model_card(info: Mapping[str, Any], results: Mapping[str, Any] | None, *, dataset_repo: str,
               repo_id: str | None = None) -> str:
    """README.md of the adapter repo: metadata, base model, recipe, data, training, results, usage."""
    s, base, lora, data = info["settings"], info["base_model"], info["lora"], info["data"]
    category, scope = data["config"], lora["scope"]
    meta: dict[str, Any] = {}
    if "/" in str(base["model_id"]):  # only a Hub id can be linked as the base model
        meta["base_model"] = base["model_id"]
    meta.update({"library_name": "peft", "pipeline_tag": "audio-text-to-text",
                 "tags": ["vocalgrad", "lora", "peft", "audio", *(f"vocalgrad-{c}" for c in category.split(","))], "datasets": [dataset_repo]})
    method = method_words(info)
    title = f"{base['registry_name']} + {method} ({scope}) for VocalGrad `{category}`"
    aug = info.get("augmentation", {"enabled": False})
    parts = [
        "---\n" + yaml.safe_dump(meta, sort_keys=False) + "---",
        f"# {title}",
        f"A LoRA adapter that teaches `{base['model_id']}` {_what_it_learns(data)}. Trained with the recipe of the "
        f"paper (SPEC §6) by `finetune/train.py`"
        + (f"; repository `{repo_id}`." if repo_id else "."),
        "## Base model",
        markdown_table(["registry name", "model id", "revision", "family", "dtype", "parameters"],
               [[base["registry_name"], f"`{base['model_id']}`", f"`{base.get('revision') or 'n/a'}`",
                 base["family"], base["dtype"], f"{base['params']:,}"]]),
        "## Recipe",
        markdown_table(["setting", "value"], [
            ["LoRA", f"r {s['lora_r']}, alpha {s['lora_alpha']}, dropout {s['lora_dropout']}" + (
                "; attached but not trained: the LLM stages fine-tune every LLM weight, the LM head included"
                if (info.get("llm_training") or {}).get("mode") == "full" else "")],
            ["scope", f"`{scope}`" + (" + audio encoder/projector" if lora.get("include_audio_tower") else "")
             + f" ({lora['n_target_modules']} linear modules, {lora['trainable_params']:,} trainable parameters)"],
            ["optimizer", f"AdamW, lr {_rates(info)}, weight decay {s['weight_decay']:g}, {s['lr_scheduler']} schedule"
             + (f", {s['warmup_steps']} warm-up steps" if s["warmup_steps"] else "")],
            ["batch", f"{s['batch_size']} x {s['grad_accum']} accumulation = {info['examples_per_step']} clips per step"],
            ["epochs / steps", f"{s['epochs']} / {info['steps']} optimizer steps ({info['world_size']} process(es))"],
            ["gradient clipping", f"global norm {s['max_grad_norm']:g}"],
            ["seed", str(s["seed"])],
            ["loss", "cross-entropy on the answer word" + (" and the end-of-turn token" if s.get("end_of_turn") else "")
             + f" (prompt variant `{data['prompt_variant']}`)"],
            *_repair_rows(info),
        ]),
        "## Data",
        _data_text(data, s["seed"]),
    ]
    if aug.get("enabled"):
        rows = [[t["name"], t["transform"], ", ".join(f"{k} {v:g}" for k, v in t["params"].items())]
                for t in aug["transforms"]]
        parts += ["### Augmentation (on)",
                  "Nuisance transforms from audiomentations that do not act on the trained attribute, drawn per "
                  "clip from (seed, epoch, clip id):", markdown_table(["name", "transform", "settings"], rows)]
    else:
        parts.append("Augmentation: off.")
    val = info.get("validation") or {}
    parts += ["## Training",
              markdown_table(["first step loss", "final step loss", "validation loss", "validation accuracy", "validation clips"],
                     [[_num(info.get("first_loss")), _num(info.get("final_loss")), _num(val.get("loss")),
                       pct(val.get("accuracy")), str(val.get("n", 0))]])]
    parts.append("## Results")
    if results is None:
        parts.append("Not evaluated yet.")
    else:
        cfg = results["config"]
        res, versions = task_metrics(results), component_versions(results)
        where = (f"test split, source `{cfg.get('source')}`, `{cfg.get('mode')}` scoring, prompt "
                 f"`{cfg.get('prompt_variant')}`, harness {versions['harness']}, parser v{versions['parser']}")
        if not is_official(str(cfg.get("source"))):
            where += (" — **not the official VCTK benchmark; not comparable with published numbers** (so no "
                      f"`{EVAL_RESULTS_FILE}` entries for `{dataset_repo}`)")
        if category in res:
            r = res[category]
            parts.append(f"In-domain (`{category}`): **{pct(r['accuracy'])} %** accuracy over {r['n']} clips "
                         f"(95 % CI {pct(r['accuracy_ci_low'])}–{pct(r['accuracy_ci_high'])}); {where}.")
        cols = [c for c in CONFIGS if c in res]
        if cols:
            rows = [[f"{category} ({scope})", *(pct(res[c]["accuracy"]) for c in cols)]]
            matrix = (info.get("eval") or {}).get("rows", {})
            if "base" in matrix:
                rows.insert(0, ["base (adapter off)", *(pct(matrix["base"].get(c)) for c in cols)])
            parts += ["Cross-category accuracy (%), all clips:", markdown_table(["trained on", *cols], rows),
                      "![cross-category accuracy](cross_category.png)"]
        parts += _kind_metric_tables(info)
    adapter_ref = repo_id or "PATH/TO/adapter"
    parts += [
        "## Use",
        "```bash\n"
        f"harness eval --model {base['registry_name']} --model-arg adapter={adapter_ref} --configs {category}\n"
        "```\n"
        "```python\n"
        "from harness.models.registry import get_model\n"
        f"lm = get_model({base['registry_name']!r}, adapter={adapter_ref!r})  # LoRA attached, unmerged\n"
        "```",
        "## Versions",
        ", ".join(f"{k} {v}" for k, v in info.get("versions", {}).items()),
    ]
    return "\n\n".join(parts) + "\n"


def write_card(out_dir: str | Path, info: Mapping[str, Any], *, dataset_repo: str, repo_id: str | None = None,
               dest: str | Path | None = None) -> Path:
    """Write README.md (and .eval_results/vocalgrad.yaml for official results) into dest (default: adapter/)."""
    out = Path(out_dir)
    dest = Path(dest) if dest is not None else out / "adapter"
    results = load_results(out)
    atomic_write_text(dest / "README.md", model_card(info, results, dataset_repo=dataset_repo, repo_id=repo_id))
    # The Hub aggregates these entries into the benchmark's leaderboard: only official-benchmark scores go there.
    if results is not None and is_official(str(results["config"].get("source", ""))) and any(
            c in PUBLISHED_NAME for c in task_metrics(results)):  # not built items (a parquet:eval_items source)
        atomic_write_text(dest / EVAL_RESULTS_FILE,
                          eval_results_yaml(info, results, dataset_repo=dataset_repo, repo_id=repo_id))
    return dest / "README.md"
