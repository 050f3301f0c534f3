"""`vocalgrad-paper`: run the paper's appendix suite for one model and assemble its tables from samples files.

    vocalgrad-paper --model NAME --out DIR [--source vctk --data-dir D | --dataset D]
                    [--loquacious-dir D] [--commonvoice-dir D] [--only GROUPS] [--skip GROUPS] [--limit N]
                    [--dry-run | --tables-only]

Every run of the suite is an ordinary harness run directory (`DIR/runs/<run>/samples_<config>.jsonl`,
resumable) with one prompt variant; `DIR/suite.json` / `suite.md` list the runs, their sizes and status;
`DIR/tables/` holds one Markdown file per table with the published values beside ours wherever
`harness/data/camera_ready_direction_metrics.csv` (or the paper text, for the human rows) has them.
`--dry-run` lists the runs and sizes and writes every table file with the reference values only.

Table numbers: 2, 3, 5, 12, 13, 15, 16 and 17 follow the published camera-ready experiment map; 6-11 and
14 follow the order of the appendix analyses it lists (confidence intervals, parsing failures, tiers,
response distribution, source-clip bias, prompt sensitivity, few-shot). The cross-attribute study is a
figure in the paper (Figure 8) and is written as a matrix table.

SPEC §8: a table never reads another prompt variant's files. A run directory whose rows carry another
prompt variant or model is an error, and a missing samples file leaves its cells marked missing and makes
the command exit non-zero; nothing is substituted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any

from harness.data import CONFIGS, PUBLISHED_NAME, attribute_word, open_source
from harness.metrics import CLIP_TYPES, Z95, binomial_interval, macro_f1, prediction_distribution, summarize
from harness.prompts import FEW_SHOT_AUDIOS, PARAPHRASES, get_variant
from harness.reference import MODEL_DISPLAY, camera_ready_rows, table2
from harness.report import load_samples
from harness.results import atomic_write_text
from harness.sampling import limited_count
from harness.settings import (
    MODES,
    ModelSettings,
    RowSettings,
    add_model_arguments,
    add_source_arguments,
    derive,
    limit_type,
    settings_from_args,
    settings_record,
)
from harness.tables import markdown_table, pct
from vocalgrad_dataset.argtypes import nonnegative_int
from vocalgrad_dataset.generate import BEEP_CATEGORIES, BEEP_PROMPT_VARIANT, config_ids
from vocalgrad_dataset.grid import CURVES, FORMAT_LABELS, TIERS

PARAPHRASE_CONFIGS: tuple[str, ...] = ("speed", "pitch", "volume")
ALT_SOURCES: dict[str, str] = {"loquacious": "LoquaciousSet (clean test)", "commonvoice-spontaneous": "Common Voice Spontaneous 4.0"}
# Human accuracy by trajectory (the paper's Table 5 human row, %), in CURVES order.
HUMAN_BY_CURVE: dict[str, float] = {"linear": 93.73, "quad_first_flat": 92.02, "quad_last_flat": 93.83, "jump": 98.46}
@dataclass(frozen=True)
class SuiteRun:
    """One evaluation of the suite: a prompt variant over a set of configs from one source."""

    name: str  # also the reference key; the directory replaces ":" with "-"
    prompt: str
    configs: tuple[str, ...]
    group: str  # what --only / --skip select
    tables: tuple[str, ...]
    source: str | None = None  # None: the suite's --source / --dataset
    audios_per_query: int = 1

    @property
    def dirname(self) -> str:
        return self.name.replace(":", "-")


def suite_runs() -> list[SuiteRun]:
    """Every run of the appendix suite, in execution order."""
    cats = tuple(CONFIGS)
    runs = [SuiteRun("main", "default", cats, "main", ("2", "5", "6", "7", "8", "9", "10", "11", "15"))]
    runs += [SuiteRun(v, v, cats, "prompt-variants", ("11",)) for v in ("swap_order", "audio_ref", "swap_order+audio_ref", "audio_first")]
    runs += [SuiteRun(f"paraphrase-{i}", f"paraphrase-{i}", PARAPHRASE_CONFIGS, "paraphrase", ("13",)) for i in (1, 2, 3)]
    runs.append(SuiteRun("few-shot+audio_ref", "few-shot+audio_ref", cats, "few-shot", ("14",), audios_per_query=FEW_SHOT_AUDIOS))
    runs.append(SuiteRun("beep", BEEP_PROMPT_VARIANT, BEEP_CATEGORIES, "beep", ("3",), source="beep"))
    runs += [SuiteRun(s, "default", cats, "sources", ("15",), source=s) for s in ALT_SOURCES]
    runs += [SuiteRun(f, "default", tuple(f"{c}-{f}" for c in cats), "formats", ("16", "17")) for f in ("yesno", "ternary")]
    runs.append(SuiteRun("source-bias", "default", tuple(f"{c}-source" for c in cats), "source-bias", ("10",)))
    runs += [SuiteRun(f"cross-attribute:{c}", f"cross-attribute:{c}", cats, "cross-attribute", ("figure8",)) for c in cats]
    return runs


GROUPS: tuple[str, ...] = tuple(dict.fromkeys(r.group for r in suite_runs()))


def select_runs(only: Sequence[str] = (), skip: Sequence[str] = ()) -> list[SuiteRun]:
    """Runs whose name or group is in `only` (all when empty) and in neither of `skip`."""
    runs = suite_runs()
    known = {r.name for r in runs} | set(GROUPS)
    for name in [*only, *skip]:
        if name not in known:
            raise ValueError(f"unknown run or group {name!r}; groups: {', '.join(GROUPS)}")
    return [r for r in runs if (not only or r.name in only or r.group in only) and r.name not in skip and r.group not in skip]


@dataclass(kw_only=True)
class SuiteSettings(ModelSettings, RowSettings):
    """What the suite runs on (recorded in suite.json): the shared model and row settings, the corpora of
    the alternative-source runs, and the run settings every run of the suite shares."""

    out: str
    loquacious_dir: str | None = None
    commonvoice_dir: str | None = None
    mode: str = "generate"
    limit: int | float | None = None
    data_workers: int = 0

    def run_source(self, run: SuiteRun) -> tuple[str, str | None, str | None]:
        """(source, data_dir, dataset) of a run: its own source, or the suite's."""
        if run.source == "loquacious":
            return run.source, self.loquacious_dir, None
        if run.source == "commonvoice-spontaneous":
            return run.source, self.commonvoice_dir, None
        if run.source is not None:
            return run.source, None, None
        return self.source, self.data_dir, self.dataset


def run_sizes(run: SuiteRun, settings: SuiteSettings) -> dict[str, int]:
    """Clips per config of a run (after --limit), from the frozen lists or the build; no audio decoded."""
    source, data_dir, dataset = settings.run_source(run)
    sizes = {}
    for config in run.configs:
        if dataset is not None:
            n = sum(len(u.clip_ids) for u in open_source("test", dataset=dataset).units(config))
        else:
            n = len(config_ids(config, "test", source, data_dir if source != "vctk" else None))
        sizes[config] = limited_count(n, settings.limit)
    return sizes


# ---- published reference rows --------------------------------------------------------------------------

_REFERENCE_PREFIXES = (
    ("vocalgrad/default/", "main"),
    ("vocalgrad/swap-order/", "swap_order"),
    ("vocalgrad/audio-ref/", "audio_ref"),
    ("vocalgrad_ablation_beep/audio-ref/", "beep"),
    ("vocalgrad_fewshot/fewshot_2x2_seed1234_audio-ref/", "few-shot+audio_ref"),
    ("rebuttal/benchmark_audio_then_text/default/", "audio_first"),
    ("rebuttal/dataset_variants/loquaciousset/benchmark/", "loquacious"),
    ("rebuttal/dataset_variants/commonvoice_spontaneous/benchmark/", "commonvoice-spontaneous"),
    ("rebuttal/paraphrase_questions/default/", "paraphrase"),
    ("vocalgrad_cross_attribute/default/", "cross-attribute"),
)
# Published paraphrase file stems -> our paraphrase numbers (SPEC §5 order).
_PARAPHRASE_STEMS = {
    "rise_fall": 1, "intensity_increase_decrease": 2, "intensity_increasing_decreasing": 3,
    "tone_rise_fall": 1, "frequency_upward_downward": 2, "frequency_rise_decline": 3,
    "pace_faster_slower": 1, "tempo_increase_decrease": 2, "delivery_accelerate_decelerate": 3,
}  # fmt: skip


def reference_index() -> dict[tuple[str, str, str], dict[str, float]]:
    """(run name, config, model stem) -> published metrics, for the runs of this suite (fine-tuning excluded)."""
    index: dict[tuple[str, str, str], dict[str, float]] = {}
    for row in camera_ready_rows():
        path = row["path"]
        prefix, run = next(((p, r) for p, r in _REFERENCE_PREFIXES if path.startswith(p)), (None, None))
        if prefix is None:
            continue
        parts = path[len(prefix) :].split("/")
        config, model = parts[0], parts[-1].rsplit(".", 1)[0]
        if run == "paraphrase":
            run = f"paraphrase-{_PARAPHRASE_STEMS[parts[1]]}"
        elif run == "cross-attribute":
            run = f"cross-attribute:{_config(parts[1])}"
        n = int(row["n_expected"])
        index[(run, _config(config), model)] = {
            "n": n, "accuracy": float(row["accuracy"]), "n_correct": int(row["n_correct"]),
            "n_unparsed": int(row["n_unparsed"]), "n_ambiguous": int(row["n_ambiguous"]), "n_error": int(row["n_error"]),
            "balanced_accuracy": float(row["balanced_accuracy"]), "increase_ratio": _float(row["increase_ratio_parsed"]),
        }  # fmt: skip
    return index


def _config(published: str) -> str:
    return {v: k for k, v in PUBLISHED_NAME.items()}[published]


def _float(value: str) -> float:
    return float(value) if value not in ("", None) else float("nan")


# ---- reading our samples -------------------------------------------------------------------------------


class SuiteInputs:
    """Samples of the suite's runs, loaded on demand, checked against the run's prompt variant and model."""

    def __init__(self, out_dir: Path, model: str, *, dry_run: bool = False) -> None:
        self.out_dir, self.model, self.dry_run = out_dir, model, dry_run
        self.runs = {r.name: r for r in suite_runs()}
        self._loaded: dict[str, dict[str, list[dict[str, Any]]]] = {}
        self._summaries: dict[tuple[str, str], dict[str, Any]] = {}
        self.missing: list[str] = []

    def _run_rows(self, name: str) -> dict[str, list[dict[str, Any]]]:
        if name not in self._loaded:
            run = self.runs[name]
            run_dir = self.out_dir / "runs" / run.dirname
            try:
                rows = load_samples(run_dir)
            except FileNotFoundError:
                rows = {}
            want = get_variant(run.prompt).name
            for config, rs in rows.items():
                variants = {r.get("prompt_variant") for r in rs}
                models = {r.get("model") for r in rs}
                if variants != {want} or models != {self.model}:
                    # SPEC §8: never read another variant's (or model's) answers into this table
                    raise ValueError(f"{run_dir}/samples_{config}.jsonl holds prompt {sorted(map(str, variants))} of model "
                                     f"{sorted(map(str, models))}; run {name!r} needs prompt {want!r} of {self.model!r}")
            self._loaded[name] = rows
        return self._loaded[name]

    def rows(self, run: str, config: str) -> list[dict[str, Any]] | None:
        """A config's samples rows of a run (re-parsed), or None when absent (recorded as missing)."""
        if self.dry_run:
            return None
        rows = self._run_rows(run).get(config)
        if rows is None:
            self.missing.append(f"runs/{self.runs[run].dirname}/samples_{config}.jsonl")
        return rows

    def summary(self, run: str, config: str) -> dict[str, Any] | None:
        """metrics.summarize of a config of a run, or None."""
        key = (run, config)
        if key not in self._summaries:
            rows = self.rows(run, config)
            if rows is None:
                return None
            self._summaries[key] = summarize(rows)
        return self._summaries[key]

    def metric(self, run: str, config: str, key: str) -> float | None:
        s = self.summary(run, config)
        return None if s is None else s[key]


# ---- tables --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSpec:
    """One output file: its number, title, what it reads and how it is rendered."""

    key: str  # "2", "3", ..., "figure8"
    filename: str
    title: str
    build: Callable[[SuiteInputs, dict, str], str]


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return mean(vals) if len(vals) == len(values) and vals else None


def _ours_label(model: str) -> str:
    return f"**{model} (this run)**"


def _published_models(ref: dict, run: str, configs: Sequence[str]) -> list[str]:
    """Published model stems (Table 2 order) with a row for every config of a run."""
    return [m for m in MODEL_DISPLAY if all((run, c, m) in ref for c in configs)]


def _accuracy_rows(inputs: SuiteInputs, ref: dict, model: str, run: str, configs: Sequence[str]) -> list[list[str]]:
    """Ours then every published model: mean and per-config all-clip accuracy (%)."""
    ours = [inputs.metric(run, c, "accuracy") for c in configs]
    body = [[_ours_label(model), pct(_mean(ours)), *map(pct, ours)]]
    for m in _published_models(ref, run, configs):
        vals = [ref[(run, c, m)]["accuracy"] for c in configs]
        body.append([MODEL_DISPLAY[m], pct(mean(vals)), *map(pct, vals)])
    return body


def table_main(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 2: accuracy per category (all clips), humans and the published models beside."""
    ours = [inputs.metric("main", c, "accuracy") for c in CONFIGS]
    body = [[_ours_label(model), pct(_mean(ours)), *map(pct, ours)]]
    body += [[name, f"{row['avg']:.1f}", *(f"{row[c]:.1f}" for c in CONFIGS)] for name, row in table2().items()]
    return markdown_table(["model", "avg", *CONFIGS], body)


def table_beep(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 3: beep ablation with the audio_ref prompt."""
    return (f"Prompt: `{BEEP_PROMPT_VARIANT}` (as published). 240 clips per category.\n\n"
            + markdown_table(["model", "avg", *BEEP_CATEGORIES], _accuracy_rows(inputs, ref, model, "beep", BEEP_CATEGORIES)))


def _by(inputs: SuiteInputs, run: str, config: str, key: str) -> dict[str, float] | None:
    rows = inputs.rows(run, config)
    if rows is None:
        return None
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(str(r.get(key)), []).append(r)
    return {k: summarize(v)["accuracy"] for k, v in out.items()}


def table_trajectory(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 5: accuracy by trajectory, each category's curve accuracy averaged equally over categories."""
    per = [_by(inputs, "main", c, "curve") for c in CONFIGS]
    ours = [_mean([p.get(cv) if p else None for p in per]) for cv in CURVES]
    body = [[_ours_label(model), *map(pct, ours)], ["Human (paper)", *(f"{HUMAN_BY_CURVE[c]:.2f}" for c in CURVES)]]
    return ("Published per-model trajectory accuracies are not in the shipped reference data; the human row is the "
            "paper's.\n\n" + markdown_table(["model", *CURVES], body))


def table_tiers(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 8: accuracy by tier per category (the published per-tier model values are not shipped)."""
    body = []
    for c in CONFIGS:
        by = _by(inputs, "main", c, "tier") or {}
        body.append([c, *(pct(by.get(t)) for t in TIERS), pct(inputs.metric("main", c, "accuracy"))])
    return markdown_table(["config", *TIERS, "all"], body)


def table_intervals(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 6: accuracy with 95 % intervals; published ones recomputed from their counts."""
    models = _published_models(ref, "main", CONFIGS)
    body = []
    for c in CONFIGS:
        s = inputs.summary("main", c)
        ours = "—" if s is None else f"{pct(s['accuracy'])} [{pct(s['accuracy_ci_low'])}, {pct(s['accuracy_ci_high'])}]"
        cl = "—" if s is None or s["accuracy_cluster_stderr"] is None else f"±{pct(Z95 * s['accuracy_cluster_stderr'])}"
        cells = []
        for m in models:
            r = ref[("main", c, m)]
            lo, hi = binomial_interval(r["n_correct"], r["n"])
            cells.append(f"{pct(r['accuracy'])} [{pct(lo)}, {pct(hi)}]")
        body.append([c, ours, cl, *cells])
    return ("Wilson 95 % intervals (the paper bootstraps Binomial(n, p̂); at n = 2,400 the two agree to "
            "0.1 point). Clustered: the 24 clips of a source clip form one cluster.\n\n"
            + markdown_table(["config", f"{model} (this run)", "clustered CI", *(MODEL_DISPLAY[m] for m in models)], body))


def table_parsing(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 7: parsing failures (unparsed, ambiguous, errors) and exact-match rate, published counts beside."""
    models = _published_models(ref, "main", CONFIGS)
    body = []
    for c in CONFIGS:
        s = inputs.summary("main", c)
        ours = ["—"] * 4 if s is None else [str(s["n_unparsed"]), str(s["n_ambiguous"]), str(s["n_error"]), pct(s["exact_match_rate"])]
        body.append([c, *ours, *(f"{ref[('main', c, m)]['n_unparsed']} / {ref[('main', c, m)]['n_ambiguous']}" for m in models)])
    return ("Ours: unparsed, of which ambiguous (both answer families), errors, exact-match rate (%). Published: "
            "unparsed / ambiguous.\n\n"
            + markdown_table(["config", "unparsed", "ambiguous", "errors", "exact %", *(MODEL_DISPLAY[m] for m in models)], body))


def table_response_distribution(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 9: share of "increase" among parsed answers per category."""
    models = _published_models(ref, "main", CONFIGS)
    body = []
    for c in [*CONFIGS, "mean"]:
        if c == "mean":
            ours = _mean([inputs.metric("main", k, "increase_ratio") for k in CONFIGS])
            pub = [mean(ref[("main", k, m)]["increase_ratio"] for k in CONFIGS) for m in models]
        else:
            ours = inputs.metric("main", c, "increase_ratio")
            pub = [ref[("main", c, m)]["increase_ratio"] for m in models]
        body.append([c, pct(ours), *map(pct, pub)])
    return ('"increase" answers among parsed answers (%); 50 on a balanced split means no bias.\n\n'
            + markdown_table(["config", f"{model} (this run)", *(MODEL_DISPLAY[m] for m in models)], body))


def _extremes(values: dict[str, float | None]) -> list[str]:
    """avg, max category (value), min category (value) as table cells."""
    vals = {k: v for k, v in values.items() if v is not None and not math.isnan(v)}
    if len(vals) != len(values) or not vals:
        return ["—", "—", "—"]
    hi, lo = max(vals, key=lambda k: (vals[k], k)), min(vals, key=lambda k: (vals[k], k))
    return [pct(mean(vals.values())), f"{hi} ({pct(vals[hi])})", f"{lo} ({pct(vals[lo])})"]


def table_source_bias(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 10: "increase" response rate on VocalGrad clips and on the 100 unmodified source clips."""
    body = [["VocalGrad", _ours_label(model), *_extremes({c: inputs.metric("main", c, "increase_ratio") for c in CONFIGS})],
            ["source clips", _ours_label(model),
             *_extremes({c: inputs.metric("source-bias", f"{c}-source", "increase_ratio") for c in CONFIGS})]]
    for m in _published_models(ref, "main", CONFIGS):
        body.append(["VocalGrad", MODEL_DISPLAY[m], *_extremes({c: ref[("main", c, m)]["increase_ratio"] for c in CONFIGS})])
    detail = [[c, pct(inputs.metric("main", c, "increase_ratio")),
               pct(inputs.metric("source-bias", f"{c}-source", "increase_ratio"))] for c in CONFIGS]
    return ('"increase" among parsed answers (%), main prompt. The published source-clip rates are not in the shipped '
            "reference data.\n\n" + markdown_table(["clips", "model", "avg", "max category", "min category"], body)
            + "\n\n" + markdown_table(["config", "VocalGrad", "source clips"], detail))


PROMPT_VARIANT_RUNS: tuple[str, ...] = ("main", "swap_order", "audio_ref", "swap_order+audio_ref", "audio_first")


def table_prompt_variants(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 11: accuracy under each prompt variant; published means per model beside."""
    ours = []
    for run in PROMPT_VARIANT_RUNS:
        vals = [inputs.metric(run, c, "accuracy") for c in CONFIGS]
        ours.append([get_variant(inputs.runs[run].prompt).name, pct(_mean(vals)), *map(pct, vals)])
    pub_runs = [r for r in PROMPT_VARIANT_RUNS if any((r, c, m) in ref for c in CONFIGS for m in MODEL_DISPLAY)]
    pub = []
    for m in MODEL_DISPLAY:
        cells = []
        for run in pub_runs:
            vals = [ref[(run, c, m)]["accuracy"] for c in CONFIGS if (run, c, m) in ref]
            cells.append(pct(mean(vals)) + ("" if len(vals) == len(CONFIGS) else f" ({len(vals)} cat.)") if vals else "—")
        pub.append([MODEL_DISPLAY[m], *cells])
    return (f"### {model} (this run): accuracy (%)\n\n" + markdown_table(["prompt", "mean", *CONFIGS], ours)
            + "\n\n### Published: mean accuracy over categories (%)\n\n"
            + markdown_table(["model", *(get_variant(inputs.runs[r].prompt).name for r in pub_runs)], pub))


def table_paraphrase_prompts(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 12: the paraphrased questions and their answer words (SPEC §5)."""
    body = [[c, f"paraphrase-{i}", q, f"{inc} / {dec}"] for c in PARAPHRASE_CONFIGS
            for i, (q, inc, dec) in enumerate(PARAPHRASES[c], start=1)]
    return ('Each question is followed by a blank line and `Answer with only one word: "{inc}" or "{dec}".` '
            "All nine are parsed with the one synonym parser.\n\n" + markdown_table(["config", "variant", "question", "words"], body))


def table_paraphrase_metrics(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 13: accuracy, "increase" ratio and unparsed answers per paraphrase, the main prompt first."""
    models = [m for m in MODEL_DISPLAY if any((f"paraphrase-{i}", c, m) in ref for i in (1, 2, 3) for c in PARAPHRASE_CONFIGS)]
    body = []
    for c in PARAPHRASE_CONFIGS:
        for run in ("main", "paraphrase-1", "paraphrase-2", "paraphrase-3"):
            s = inputs.summary(run, c)
            ours = ["—"] * 3 if s is None else [pct(s["accuracy"]), pct(s["increase_ratio"]), str(s["n_unparsed"])]
            pub = []
            for m in models:
                r = ref.get((run, c, m))
                pub.append("—" if r is None else f"{pct(r['accuracy'])} / {pct(r['increase_ratio'])} / {r['n_unparsed']}")
            body.append([c, "main prompt" if run == "main" else run, *ours, *pub])
    return ("Ours: accuracy (%), increase ratio among parsed (%), unparsed. Published: the same three, "
            "`acc / inc / unparsed`.\n\n"
            + markdown_table(["config", "prompt", "acc", "inc.", "unparsed", *(MODEL_DISPLAY[m] for m in models)], body))


def table_few_shot(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 14: few-shot (2 + 2 train examples, audio_ref wording) accuracy."""
    run = "few-shot+audio_ref"
    return ("4 labelled train clips of the same category per query (2 per label, seed 1234), interleaved with their "
            "audio, audio_ref wording, as published.\n\n"
            + markdown_table(["model", "avg", *CONFIGS], _accuracy_rows(inputs, ref, model, run, CONFIGS)))


def table_source_domain(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 15: accuracy on VCTK and the two alternative corpora (16 kHz)."""
    from vocalgrad_dataset.card import noop_text

    runs = {"main": "VCTK", **ALT_SOURCES}
    body = []
    for run, label in runs.items():
        vals = [inputs.metric(run, c, "accuracy") for c in CONFIGS]
        body.append([label, _ours_label(model), pct(_mean(vals)), *map(pct, vals)])
    for m in MODEL_DISPLAY:
        for run, label in runs.items():
            if all((r, c, m) in ref for r in ALT_SOURCES for c in CONFIGS):
                vals = [ref[(run, c, m)]["accuracy"] for c in CONFIGS]
                body.append([label, MODEL_DISPLAY[m], pct(mean(vals)), *map(pct, vals)])
    return f"{noop_text()}\n\n" + markdown_table(["source", "model", "avg", *CONFIGS], body)


FORMAT_NAMES = {"yesno": "yes/no (change detection)", "ternary": "ternary (increase/decrease/constant)"}


def table_macro_f1(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 16: macro-F1 of the yes/no and ternary formats per category."""
    body = []
    for fmt, label in FORMAT_NAMES.items():
        vals = [None if (rows := inputs.rows(fmt, f"{c}-{fmt}")) is None else macro_f1(rows) for c in CONFIGS]
        body.append([label, pct(_mean(vals)), *map(pct, vals)])
    return ("Macro-F1 (%) over the gold classes (2,400 yes / 100 no; 1,200 increase / 1,200 decrease / 100 constant "
            "per category); an unparsed answer is a miss of its true class, never a class of its own. The paper's "
            "values are not in the shipped reference data.\n\n" + markdown_table(["format", "mean", *CONFIGS], body))


def table_prediction_distribution(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Table 17: prediction shares by clip type, averaged equally over the nine categories."""
    parts = []
    types = list(CLIP_TYPES.values())
    for fmt, label in FORMAT_NAMES.items():
        labels = sorted(FORMAT_LABELS[fmt], key=("yes", "no", "increase", "decrease", "constant").index)
        per = [None if (rows := inputs.rows(fmt, f"{c}-{fmt}")) is None else prediction_distribution(rows, labels)
               for c in CONFIGS]
        body = []
        for pred in [*labels, "unparsed"]:
            body.append([pred, *(pct(_mean([d[t][pred] if d and t in d else None for d in per])) for t in types)])
        parts.append(f"### {label}\n\n" + markdown_table(["prediction", *types], body))
    return ("Share of each answer within each clip type (%), per category, then averaged equally over categories.\n\n"
            + "\n\n".join(parts))


def table_cross_attribute(inputs: SuiteInputs, ref: dict, model: str) -> str:
    """Figure 8 as a table: accuracy when the prompt asks about another category's attribute."""
    def matrix(get: Callable[[str, str], float | None]) -> str:
        body = [[actual, *(pct(get(actual, asked)) for asked in CONFIGS)] for actual in CONFIGS]
        return markdown_table(["audio \\ asked", *CONFIGS], body)

    parts = [f"### {model} (this run)\n\n" + matrix(lambda a, q: inputs.metric(f"cross-attribute:{q}", a, "accuracy"))]
    for m in MODEL_DISPLAY:
        if all((f"cross-attribute:{q}", a, m) in ref for q in CONFIGS for a in CONFIGS):
            parts.append(f"### {MODEL_DISPLAY[m]} (published)\n\n"
                         + matrix(lambda a, q, m=m: ref[(f"cross-attribute:{q}", a, m)]["accuracy"]))
    return ("Rows: the category whose attribute changes in the audio; columns: the attribute word asked "
            f"({', '.join(f'{c} = {attribute_word(c)}' for c in CONFIGS)}). Accuracy (%) against the audio's "
            "direction.\n\n" + "\n\n".join(parts))


TABLES: tuple[TableSpec, ...] = (
    TableSpec("2", "table02_main_accuracy.md", "Accuracy on VocalGrad (all clips)", table_main),
    TableSpec("3", "table03_beep_ablation.md", "Beep ablation: no linguistic content", table_beep),
    TableSpec("5", "table05_trajectory.md", "Accuracy by trajectory", table_trajectory),
    TableSpec("6", "table06_confidence_intervals.md", "Accuracy with 95 % confidence intervals", table_intervals),
    TableSpec("7", "table07_parsing_failures.md", "Parsing failures and exact match", table_parsing),
    TableSpec("8", "table08_tiers.md", "Accuracy by tier", table_tiers),
    TableSpec("9", "table09_response_distribution.md", 'Response distribution: share of "increase"', table_response_distribution),
    TableSpec("10", "table10_source_clip_bias.md", '"increase" bias on VocalGrad and on unmodified source clips', table_source_bias),
    TableSpec("11", "table11_prompt_variants.md", "Prompt sensitivity", table_prompt_variants),
    TableSpec("12", "table12_paraphrase_prompts.md", "Paraphrased questions", table_paraphrase_prompts),
    TableSpec("13", "table13_paraphrase_metrics.md", "Paraphrased questions: results", table_paraphrase_metrics),
    TableSpec("14", "table14_few_shot.md", "Few-shot prompting", table_few_shot),
    TableSpec("15", "table15_source_domain.md", "Other source corpora", table_source_domain),
    TableSpec("16", "table16_format_macro_f1.md", "Problem formats: macro-F1", table_macro_f1),
    TableSpec("17", "table17_prediction_distribution.md", "Problem formats: predictions by clip type", table_prediction_distribution),
    TableSpec("figure8", "figure08_cross_attribute.md", "Cross-attribute prompts", table_cross_attribute),
)  # fmt: skip


def _missing_text(missing: Sequence[str]) -> str:
    """"missing samples: runs/a (9 configs), runs/b/samples_x.jsonl" from the missing file paths."""
    by_dir: dict[str, list[str]] = {}
    for path in missing:
        folder, _, name = path.rpartition("/")
        by_dir.setdefault(folder, []).append(name)
    parts = [f"{d}/{n[0]}" if len(n) == 1 else f"{d} ({len(n)} configs)" for d, n in by_dir.items()]
    return "missing samples: " + ", ".join(parts)


def assemble_tables(out_dir: str | Path, model: str, *, dry_run: bool = False) -> dict[str, str | None]:
    """Write every table file under out_dir/tables; returns table key -> None when complete, else why not."""
    out = Path(out_dir)
    inputs = SuiteInputs(out, model, dry_run=dry_run)
    ref = reference_index()
    status: dict[str, str | None] = {}
    index = ["| table | file | status |", "|---|---|---|"]
    for spec in TABLES:
        inputs.missing = []
        try:
            body = spec.build(inputs, ref, model)
            problem = _missing_text(inputs.missing) if inputs.missing else None
        except ValueError as err:  # a run directory of another prompt variant or model (SPEC §8)
            body, problem = "", str(err)
        status[spec.key] = problem
        head = f"# {'Figure 8' if spec.key == 'figure8' else f'Table {spec.key}'}: {spec.title}\n\n"
        note = ("_Dry run: no model outputs yet; published values only._\n\n" if dry_run
                else f"_INCOMPLETE: {problem}._\n\n" if problem else "")
        atomic_write_text(out / "tables" / spec.filename, f"{head}Model: `{model}`.\n\n{note}{body}\n")
        index.append(f"| {spec.key} | [{spec.filename}]({spec.filename}) | "
                     f"{'dry run' if dry_run else 'incomplete' if problem else 'complete'} |")
    atomic_write_text(out / "tables" / "README.md", "# VocalGrad paper tables\n\n" + "\n".join(index) + "\n")
    return status


# ---- running the suite ---------------------------------------------------------------------------------


def plan(runs: Sequence[SuiteRun], settings: SuiteSettings) -> list[dict[str, Any]]:
    """Every run with its directory, source and sizes (what --dry-run prints)."""
    out = []
    for run in runs:
        source, data_dir, dataset = settings.run_source(run)
        sizes = run_sizes(run, settings)
        out.append({
            "run": run.name, "dir": f"runs/{run.dirname}", "prompt": run.prompt, "group": run.group,
            "source": f"dataset:{dataset}" if dataset else source, "data_dir": data_dir, "configs": sizes,
            "queries": sum(sizes.values()), "audios_per_query": run.audios_per_query, "tables": list(run.tables),
        })  # fmt: skip
    return out


def _plan_markdown(model: str, entries: Sequence[dict[str, Any]]) -> str:
    body = [[e["run"], e["prompt"], e["source"], str(len(e["configs"])), f"{e['queries']:,}", str(e["audios_per_query"]),
             ", ".join(e["tables"]), e.get("status", "planned")] for e in entries]
    total = sum(e["queries"] for e in entries)
    return (f"# VocalGrad paper suite for `{model}`\n\n{len(entries)} runs, {total:,} queries.\n\n"
            + markdown_table(["run", "prompt", "source", "configs", "queries", "audios/query", "tables", "status"], body) + "\n")


def _write_plan(out: Path, settings: SuiteSettings, entries: Sequence[dict[str, Any]]) -> None:
    atomic_write_text(out / "suite.json", json.dumps({"settings": settings_record(settings), "runs": list(entries)}, indent=2) + "\n")
    atomic_write_text(out / "suite.md", _plan_markdown(settings.model, entries))


def run_suite(settings: SuiteSettings, runs: Sequence[SuiteRun]) -> list[dict[str, Any]]:
    """Evaluate every run (resuming what exists), one model load for all; failures are recorded, not raised."""
    from harness.models.registry import load_model
    from harness.runner import Dist, EvalSettings, run_eval

    out = Path(settings.out)
    entries = plan(runs, settings)
    _write_plan(out, settings, entries)
    model, dist = load_model(settings), Dist()
    for run, entry in zip(runs, entries, strict=True):
        source, data_dir, dataset = settings.run_source(run)
        ev = derive(EvalSettings, settings, configs=list(run.configs), out=str(out / "runs" / run.dirname),
                    prompt=run.prompt, source=source, data_dir=data_dir, dataset=dataset, split="test")
        start = time.time()
        try:
            run_eval(ev, model=model, dist=dist)
            entry["status"] = "done"
        except Exception as err:  # one failing run (missing corpus, model limits) must not stop the suite
            entry["status"] = f"failed: {type(err).__name__}: {err}"
            print(f"vocalgrad-paper: run {run.name} failed: {err}", file=sys.stderr)
        entry["seconds"] = round(time.time() - start, 1)
        _write_plan(out, settings, entries)
    return entries


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `vocalgrad-paper`."""
    p = argparse.ArgumentParser(prog="vocalgrad-paper", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(p)
    g = add_source_arguments(p, what="VCTK-based runs")
    g.add_argument("--dataset", default=None, help="a Parquet build instead of generating the VCTK-based runs")
    g.add_argument("--loquacious-dir", default=None, help="local LoquaciousSet copy or Parquet files (default: the Hub)")
    g.add_argument("--commonvoice-dir", default=None, help="the unpacked Common Voice Spontaneous Speech 4.0 download")
    r = p.add_argument_group("suite")
    r.add_argument("--out", required=True, help="suite directory (runs/, tables/, suite.json); resumed if it exists")
    r.add_argument("--only", default="", help=f"comma-separated runs or groups ({', '.join(GROUPS)})")
    r.add_argument("--skip", default="", help="comma-separated runs or groups to leave out")
    r.add_argument("--limit", type=limit_type, default=None,
                   help="N clips (or a fraction) of each config, stratified (smoke runs)")
    r.add_argument("--mode", choices=MODES, default="generate", help="(default: %(default)s)")
    r.add_argument("--data-workers", type=nonnegative_int, default=0, help="(default: %(default)s)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--dry-run", action="store_true", help="list the runs and sizes; write the tables with published values")
    g.add_argument("--tables-only", action="store_true", help="assemble the tables from the existing runs only")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `vocalgrad-paper`: 0 when every run and table is complete, 1 otherwise, 2 on bad input."""
    ns = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(SuiteSettings, ns)
        runs = select_runs([s for s in ns.only.split(",") if s], [s for s in ns.skip.split(",") if s])
        out = Path(ns.out)
        if ns.dry_run:
            entries = plan(runs, settings)
            _write_plan(out, settings, entries)
            assemble_tables(out, ns.model, dry_run=True)
            print(_plan_markdown(ns.model, entries))
            return 0
        failed_runs = [] if ns.tables_only else [e for e in run_suite(settings, runs) if e["status"] != "done"]
        status = assemble_tables(out, ns.model)
    except (ValueError, FileNotFoundError) as err:
        print(f"vocalgrad-paper: error: {err}", file=sys.stderr)
        return 2
    incomplete = {k: v for k, v in status.items() if v}
    for key, why in incomplete.items():
        print(f"table {key}: {why}", file=sys.stderr)
    print(f"wrote {out / 'tables'} ({len(status) - len(incomplete)}/{len(status)} tables complete, "
          f"{len(failed_runs)} run(s) failed)")
    return 1 if incomplete or failed_runs else 0


if __name__ == "__main__":
    raise SystemExit(main())
