"""Answers -> a harness run directory (samples_<config>.jsonl + results.json) and a leaderboard submission.

Each answer becomes one samples row (so a clip answered by k annotators appears k times, and pooled accuracy
is the mean over every answer): `raw` is the answer word, `pred` what the config's parser reads from it,
`model` "human", `mode` "listening", with the annotator's pseudonym and response time as extra keys.
results.json is written by the harness's own writer, so `harness report RUN_DIR` and
`harness leaderboard submit RUN_DIR` treat the run like any model's.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from harness import results as res
from harness.kinds import task_kind
from harness.lm_eval_samples import with_lm_eval_fields
from listening.items import samples_row
from listening.store import Store
from listening.study import PROMPT_VARIANT, answer_options, item_record, source_description
from vocalgrad_dataset import grid
from vocalgrad_dataset.tasks import config_spec, published_name

MODEL = "human"
MODE = "listening"


def samples_rows(store: Store, exclude: Collection[str] = ()) -> dict[str, list[dict[str, Any]]]:
    """Samples rows per config (study order), items in sample order, annotators by name within an item."""
    from harness.prompts import get_variant

    configs = list(store.study["configs"])
    order = {it["position"]: k for k, it in enumerate(store.items())}
    answers = sorted((a for a in store.answers() if a["annotator"] not in exclude),
                     key=lambda a: (order[a["position"]], a["annotator"]))
    out: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    items = {(it["config"], it["benchmark_clip_id"]): it for it in store.items()}
    for a in answers:
        config = a["config"]
        record = item_record(store.study, items[(config, a["benchmark_clip_id"])])
        if record is not None:  # multiple choice: the option chosen, scored as acc and ALA by the harness
            out[config].append({**samples_row(a, record), "prompt_variant": PROMPT_VARIANT, **_listener(a)})
            continue
        spec = config_spec(config)
        vocab = get_variant(PROMPT_VARIANT).vocabulary(config)
        word = dict(answer_options(config))[a["answer"]]
        pred = vocab.parser.parse(word)
        out[config].append({
            "benchmark_clip_id": a["benchmark_clip_id"], "category": config, "gold": a["gold"], "pred": pred,
            "raw": word, "parsed": pred is not None, "margin": None,
            "prompt": spec.prompt(), "prompt_variant": PROMPT_VARIANT,
            "answer_words": list(vocab.choices), "parser": vocab.parser.id, "tier": a["tier"], "curve": a["curve"],
            "direction": a["direction"], "source_clip_id": a["source_clip_id"], **_listener(a),
        })
    return out


def _listener(answer: dict[str, Any]) -> dict[str, Any]:
    """The samples-row keys every answer carries: who answered, how fast, as a model run's keys would be."""
    ms = answer["client_ms"]
    return {"error": None, "retried": False, "model": MODEL, "mode": MODE, "annotator": answer["annotator"],
            "rt_ms": round(ms) if ms is not None else round(1000 * (answer["answered"] - answer["issued"]))}


def _exclusions(store: Store, protocol: dict[str, Any]) -> dict[str, str]:
    """Annotators the protocol leaves out of the scores, with why: a failed or unfinished headphone screen
    (of an annotator who answered), catch trials below the threshold."""
    from listening.analysis import catch_report

    answered = {p["annotator"] for p in store.progress() if p["answered"]}
    out = {}
    for name, hp in store.headphone_results().items():
        if hp["trials"] and name in answered and hp["passed"] is not True:
            out[name] = f"headphone screen {hp['correct']}/{hp['trials']} right (pass: {hp['pass_mark']})"
    threshold = float(protocol.get("catch_threshold", 0.0))
    for name, c in catch_report(store.answers(("catch",)), threshold).items():
        if c["failed"] and name not in out:
            out[name] = f"catch trials {c['correct']}/{c['n']} right (threshold {100 * threshold:.0f} %)"
    return out


def study_status(store: Store, attention_threshold: float, exclude: Collection[str] = ()) -> dict[str, Any]:
    """The study against its design: annotators, completeness, exclusions (protocol and by hand), attention
    flags, and the problems that put it below its design (an export of it is refused or marked)."""
    from listening.analysis import analyze, careless

    protocol = store.protocol()
    progress = store.progress()
    excluded = {**_exclusions(store, protocol), **{n: "left out by hand" for n in exclude}}
    included = [p for p in progress if p["annotator"] not in excluded]
    complete = [p["annotator"] for p in included if p["answered"] == p["total"]]
    flagged = careless(analyze([a for a in store.answers() if a["annotator"] not in excluded], attention_threshold))
    expected = sum(p["total"] for p in progress)
    problems = [f"{p['annotator']} answered {p['answered']} of {p['total']} items"
                for p in included if p["answered"] < p["total"]]
    problems += [f"{name} is flagged careless (high-tier accuracy < {attention_threshold})" for name in flagged]
    want = int(protocol.get("min_annotators", 1))
    if len(complete) < want:
        problems.append(f"{len(complete)} complete annotator(s) left after exclusions; the design needs {want}")
    return {
        "annotators": len(progress), "included": [p["annotator"] for p in included], "complete": complete,
        "completeness": sum(p["answered"] for p in progress) / expected if expected else 0.0,
        "excluded": excluded, "careless": flagged, "min_annotators": want, "problems": problems,
        "meets_design": not problems,
    }


def export_run(store: Store, out_dir: str | Path, exclude: Collection[str] = (),
               status: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write samples_<config>.jsonl and results.json into out_dir; returns the results.json content.
    `status` (`study_status`) is recorded in the run config, so the leaderboard shows it beside the row."""
    out = Path(out_dir)
    rows = {c: r for c, r in samples_rows(store, exclude).items() if r}
    if not rows:
        raise ValueError(f"{store.path}: no answers to export yet")
    study = store.study
    description = source_description(study)
    items = store.items()
    tasks = {}
    for config in rows:
        mcq = task_kind(config).per_row  # answers per item: the options; no published VocalGrad name
        vocab_words = sorted({o for r in rows[config] for o in r["options"]}) if mcq else [
            w for _, w in answer_options(config)]
        ids = [it["benchmark_clip_id"] for it in items if it["config"] == config]
        tasks[config] = {
            "task": config, "published_category": config if mcq else published_name(config), "split": study["split"],
            "source": description, "prompt_variant": PROMPT_VARIANT,
            "parser": rows[config][0]["parser"], "answer_words": vocab_words, "n_expected": len(rows[config]),
            "n_original": study["pool_sizes"][config], "ids_sha256": grid.ids_sha256(ids),
            "n_items": len(ids), "n_annotators": len({r["annotator"] for r in rows[config]}),
        }
    run_config = {
        "model": MODEL, "model_args": {}, "mode": MODE, "prompt_variant": PROMPT_VARIANT, "split": study["split"],
        "source": description, "batch_size": 1, "num_processes": 1, "max_new_tokens": 0,
        "retry_max_new_tokens": 0, "limit": None,
        "listening": {"n_per_config": study["n"], "seed": study["seed"], "sampler_version": study["sampler_version"],
                      "annotators": sorted({r["annotator"] for rs in rows.values() for r in rs}),
                      "excluded": sorted(exclude), "protocol": study.get("protocol"),
                      **({"design": status} if status is not None else {})},
    }
    for config, config_rows in rows.items():  # lm-eval's per-sample keys too: doc_id is the item's study position
        order = {it["benchmark_clip_id"]: i for i, it in enumerate(it for it in items if it["config"] == config)}
        res.write_jsonl(res.samples_path(out, config),
                        [with_lm_eval_fields(r, order[r["benchmark_clip_id"]], (0, 0)) for r in config_rows])
    results = res.build_results(rows, run_config=run_config, task_configs=tasks,
                                n_original={c: t["n_original"] for c, t in tasks.items()})
    res.write_results(out / "results.json", results)
    return results


def write_submission(run_dir: str | Path, path: str | Path, model_name: str, notes: str | None = None) -> Path:
    """A leaderboard submission of an exported run (validated first; raises ValueError naming problems)."""
    from harness.leaderboard.submit import make_submission
    from harness.leaderboard.submit import write_submission as write
    from harness.leaderboard.validate import validate_submission

    sub = make_submission(run_dir, model_name=model_name, precision="n/a (human listeners)", notes=notes)
    errors = validate_submission(sub)
    if errors:
        raise ValueError(f"{run_dir} does not make a valid submission:\n  " + "\n  ".join(errors))
    return write(sub, path)
