"""The table kinds a suite declaration names (`kind:` in suite.yaml): one builder each, registered by name.

A builder gets a TableRequest (the suite's samples, the published index, the model, the runs the table
declares and their row labels) and returns the table's Markdown body. It reads only the runs it is given,
by their own configs, so the same kind serves a new run: `accuracy` over a paraphrase run of one's own is a
YAML entry, not code. Published values appear beside ours where the index has the run's name (see
harness/paper/reference.py). Each kind says how many runs it reads and checks what it needs of them; the
suite loader turns a failed check into a one-line error naming the table.

A new kind is a function here decorated with `@table_kind("name", runs=...)` (Python); a new table of an
existing kind is a YAML entry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import mean
from typing import Any

from harness.data import CONFIGS, attribute_word
from harness.kinds import all_kinds, task_kind
from harness.metrics import (
    CLIP_TYPES,
    Z95,
    binomial_interval,
    macro_f1,
    prediction_distribution,
    summarize,
    too_few_clusters,
)
from harness.paper.declared import SuiteRun
from harness.paper.inputs import SuiteInputs
from harness.paper.reference import ReferenceIndex
from harness.prompts import PARAPHRASES, get_variant
from harness.reference import MODEL_DISPLAY, table2
from harness.tables import interval, markdown_table, pct
from vocalgrad_dataset.grid import CURVES, TIERS
from vocalgrad_dataset.tasks import resolve

# Human accuracy by trajectory (the paper's Table 5 human row, %), in CURVES order.
HUMAN_BY_CURVE: dict[str, float] = {"linear": 93.73, "quad_first_flat": 92.02, "quad_last_flat": 93.83, "jump": 98.46}
PARAPHRASE_CONFIGS: tuple[str, ...] = ("speed", "pitch", "volume")  # the paper's order of the paraphrased configs
PREDICTION_ORDER: tuple[str, ...] = ("yes", "no", "increase", "decrease", "constant")  # Table 17's row order
MISSING = "—"


@dataclass(frozen=True)
class TableRequest:
    """What a builder reads: the suite's samples, the published index, the model, the table's runs and labels."""

    inputs: SuiteInputs
    reference: ReferenceIndex
    model: str
    runs: tuple[SuiteRun, ...]
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def run(self) -> SuiteRun:
        """The first run (the only one of a one-run kind)."""
        return self.runs[0]

    @property
    def ours(self) -> str:
        """The row label of this model's values."""
        return f"**{self.model} (this run)**"

    def label(self, run: SuiteRun) -> str:
        """A run's row label: the declared one, else its name."""
        return self.labels.get(run.name, run.name)

    def metric(self, run: SuiteRun, config: str, key: str) -> float | None:
        """One of our summarize() values (None when the samples are missing)."""
        return self.inputs.metric(run.name, config, key)

    def published(self, run: SuiteRun, config: str, model: str) -> dict[str, float] | None:
        """The published metrics of a model on a config of a run, or None."""
        return self.reference.get((run.name, config, model))

    def published_models(self, run: SuiteRun, configs: Sequence[str] | None = None) -> list[str]:
        """Published model stems (Table 2 order) with a value for every config of a run."""
        configs = run.configs if configs is None else configs
        return [m for m in MODEL_DISPLAY if all((run.name, c, m) in self.reference for c in configs)]


Check = Callable[[Sequence["SuiteRun"]], "str | None"]  # what a kind needs of its runs: None, or why not


@dataclass(frozen=True)
class TableKind:
    """A table builder, how many runs it reads (max None: any number) and the checks of those runs."""

    name: str
    build: Callable[[TableRequest], str]
    min_runs: int
    max_runs: int | None
    checks: tuple[Check, ...] = ()

    def problem(self, runs: Sequence[SuiteRun]) -> str | None:
        """Why these runs do not fit this kind, or None."""
        if len(runs) < self.min_runs or (self.max_runs is not None and len(runs) > self.max_runs):
            return f"kind {self.name!r} reads {self.arity()}, got {len(runs)}"
        return next((why for check in self.checks if (why := check(runs)) is not None), None)

    def arity(self) -> str:
        """"exactly one run", "at least 2 runs", ..."""
        if self.max_runs == self.min_runs:
            return {0: "no runs", 1: "exactly one run"}.get(self.min_runs, f"exactly {self.min_runs} runs")
        if self.max_runs is not None:
            return f"{self.min_runs} to {self.max_runs} runs"
        return f"at least {self.min_runs} run{'s' if self.min_runs != 1 else ''}"


TABLE_KINDS: dict[str, TableKind] = {}


def table_kind(name: str, *, runs: int | tuple[int, int | None], checks: tuple[Check, ...] = ()) -> Callable:
    """Register a builder as kind `name`; runs: an exact count, or (minimum, maximum or None)."""
    low, high = (runs, runs) if isinstance(runs, int) else runs

    def register(build: Callable[[TableRequest], str]) -> Callable[[TableRequest], str]:
        TABLE_KINDS[name] = TableKind(name, build, low, high, checks)
        return build

    return register


# ---- checks of a table's runs ----------------------------------------------------------------------------


def nine_categories(runs: Sequence[SuiteRun]) -> str | None:
    """The run covers the nine categories in Table 2 order (the published Table 2 rows have those columns)."""
    bad = [r.name for r in runs if tuple(r.configs) != CONFIGS]
    return f"run {bad[0]!r} must have configs \"{{category}}\" (the nine categories)" if bad else None


def same_configs(runs: Sequence[SuiteRun]) -> str | None:
    """Every run has the first run's configs (the table's columns)."""
    bad = [r.name for r in runs if r.configs != runs[0].configs]
    return f"run {bad[0]!r} must have the configs of run {runs[0].name!r}" if bad else None


def covers_second(runs: Sequence[SuiteRun]) -> str | None:
    """Every run covers the configs of the second run (the first is the baseline prompt)."""
    bad = [r.name for r in runs if not set(runs[1].configs) <= set(r.configs)]
    return f"run {bad[0]!r} must cover the configs of run {runs[1].name!r}" if bad else None


def paired_configs(runs: Sequence[SuiteRun]) -> str | None:
    """The runs have as many configs each; they pair in order."""
    bad = [r.name for r in runs if len(r.configs) != len(runs[0].configs)]
    return f"run {bad[0]!r} must have as many configs as run {runs[0].name!r} (they pair in order)" if bad else None


def answer_formats(runs: Sequence[SuiteRun]) -> str | None:
    """Each run is of one yes/no or ternary format, over the first run's categories in order."""
    fixed = [k.name for k in all_kinds() if k.fixed_question]
    for run in runs:
        kinds = {task_kind(c).name for c in run.configs}
        if len(kinds) != 1 or not kinds <= set(fixed):
            return f"run {run.name!r} must be of one format ({' or '.join(fixed)}), got {sorted(kinds)}"
        if categories(run) != categories(runs[0]):
            return f"run {run.name!r} must cover the categories of run {runs[0].name!r} in the same order"
    return None


def cross_attribute_prompts(runs: Sequence[SuiteRun]) -> str | None:
    """Every run asks a cross-attribute question."""
    bad = [r.name for r in runs if get_variant(r.prompt).base != "cross-attribute"]
    return f"run {bad[0]!r} must have a cross-attribute:<category> prompt" if bad else None


def categories(run: SuiteRun) -> list[str]:
    """The category of each config of a run ("speed-yesno" -> "speed")."""
    return [resolve(c).spec.category.name for c in run.configs]


# ---- shared cells --------------------------------------------------------------------------------------


def mean_or_none(values: Sequence[float | None]) -> float | None:
    """The mean, or None unless every value is present (a missing config leaves the mean missing)."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return mean(vals) if len(vals) == len(values) and vals else None


def accuracy_cells(t: TableRequest, run: SuiteRun, configs: Sequence[str]) -> list[str]:
    """Our mean and per-config all-clip accuracy (%) of a run."""
    ours = [t.metric(run, c, "accuracy") for c in configs]
    return [pct(mean_or_none(ours)), *map(pct, ours)]


def ours_accuracy_row(t: TableRequest, run: SuiteRun, configs: Sequence[str]) -> list[str]:
    """This model's row: its label, mean and per-config accuracy."""
    return [t.ours, *accuracy_cells(t, run, configs)]


def accuracy_rows(t: TableRequest, run: SuiteRun, configs: Sequence[str]) -> list[list[str]]:
    """Ours then every published model: mean and per-config all-clip accuracy (%)."""
    body = [ours_accuracy_row(t, run, configs)]
    for m in t.published_models(run, configs):
        vals = [t.reference[(run.name, c, m)]["accuracy"] for c in configs]
        body.append([MODEL_DISPLAY[m], pct(mean(vals)), *map(pct, vals)])
    return body


def accuracy_by(t: TableRequest, run: SuiteRun, config: str, key: str) -> dict[str, float] | None:
    """Accuracy per value of a row field (tier, curve) of a config of a run, or None when missing."""
    rows = t.inputs.rows(run.name, config)
    if rows is None:
        return None
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(str(r.get(key)), []).append(r)
    return {k: summarize(v)["accuracy"] for k, v in out.items()}


def extremes(values: dict[str, float | None]) -> list[str]:
    """avg, max category (value), min category (value) as table cells."""
    vals = {k: v for k, v in values.items() if v is not None and not math.isnan(v)}
    if len(vals) != len(values) or not vals:
        return [MISSING] * 3
    hi, lo = max(vals, key=lambda k: (vals[k], k)), min(vals, key=lambda k: (vals[k], k))
    return [pct(mean(vals.values())), f"{hi} ({pct(vals[hi])})", f"{lo} ({pct(vals[lo])})"]


def model_names(models: Sequence[str]) -> list[str]:
    """Display names of published model stems."""
    return [MODEL_DISPLAY[m] for m in models]


# ---- the kinds -----------------------------------------------------------------------------------------


@table_kind("published-table2", runs=1, checks=(nine_categories,))
def published_table2(t: TableRequest) -> str:
    """Accuracy per category (all clips), the paper's Table 2 rows (humans, published models) beside."""
    configs = t.run.configs
    body = [ours_accuracy_row(t, t.run, configs)]
    body += [[name, f"{row['avg']:.1f}", *(f"{row[c]:.1f}" for c in configs)] for name, row in table2().items()]
    return markdown_table(["model", "avg", *configs], body)


@table_kind("accuracy", runs=1)
def accuracy(t: TableRequest) -> str:
    """Accuracy per config (all clips) of one run, every published model with all its configs beside."""
    return markdown_table(["model", "avg", *t.run.configs], accuracy_rows(t, t.run, t.run.configs))


@table_kind("trajectory", runs=1)
def trajectory(t: TableRequest) -> str:
    """Accuracy by trajectory, each config's curve accuracy averaged equally over configs; the human row."""
    per = [accuracy_by(t, t.run, c, "curve") for c in t.run.configs]
    ours = [mean_or_none([p.get(cv) if p else None for p in per]) for cv in CURVES]
    body = [[t.ours, *map(pct, ours)], ["Human (paper)", *(f"{HUMAN_BY_CURVE[c]:.2f}" for c in CURVES)]]
    return ("Published per-model trajectory accuracies are not in the shipped reference data; the human row is the "
            "paper's.\n\n" + markdown_table(["model", *CURVES], body))


@table_kind("tiers", runs=1)
def tiers(t: TableRequest) -> str:
    """Accuracy by tier per config (the published per-tier model values are not shipped)."""
    body = []
    for c in t.run.configs:
        by = accuracy_by(t, t.run, c, "tier") or {}
        body.append([c, *(pct(by.get(tier)) for tier in TIERS), pct(t.metric(t.run, c, "accuracy"))])
    return markdown_table(["config", *TIERS, "all"], body)


def config_rows(t: TableRequest, ours: Callable[[dict[str, Any] | None], list[str]],
                published: Callable[[dict[str, float]], str]) -> tuple[list[str], list[list[str]]]:
    """The published models with every config, and one row per config of the run: the config, our cells
    (from its summary, None when missing), one published cell per model."""
    run = t.run
    models = t.published_models(run)
    body = [[c, *ours(t.inputs.summary(run.name, c)), *(published(t.reference[(run.name, c, m)]) for m in models)]
            for c in run.configs]
    return models, body


def interval_cells(summary: dict[str, Any] | None) -> list[str]:
    """Our accuracy [Wilson interval] and the clustered half-width."""
    if summary is None:
        return [MISSING, MISSING]
    ours = f"{pct(summary['accuracy'])} {interval(summary)}"
    se = summary["accuracy_cluster_stderr"]
    return [ours, (too_few_clusters(summary) or MISSING) if se is None else f"±{pct(Z95 * se)}"]


def published_interval(r: dict[str, float]) -> str:
    """A published accuracy with the Wilson interval of its counts."""
    lo, hi = binomial_interval(int(r["n_correct"]), int(r["n"]))
    return f"{pct(r['accuracy'])} [{pct(lo)}, {pct(hi)}]"


@table_kind("confidence-intervals", runs=1)
def confidence_intervals(t: TableRequest) -> str:
    """Accuracy with 95 % intervals per config; published ones recomputed from their counts."""
    models, body = config_rows(t, interval_cells, published_interval)
    return ("Wilson 95 % intervals (the paper bootstraps Binomial(n, p̂); at n = 2,400 the two agree to "
            "0.1 point). Clustered: the 24 clips of a source clip form one cluster (CR1, shown from 10 clusters on: "
            "Cameron & Miller 2015).\n\n"
            + markdown_table(["config", f"{t.model} (this run)", "clustered CI", *model_names(models)], body))


def parsing_cells(summary: dict[str, Any] | None) -> list[str]:
    """Our unparsed, ambiguous and error counts and exact-match rate."""
    if summary is None:
        return [MISSING] * 4
    return [str(summary["n_unparsed"]), str(summary["n_ambiguous"]), str(summary["n_error"]),
            pct(summary["exact_match_rate"])]


@table_kind("parsing-failures", runs=1)
def parsing_failures(t: TableRequest) -> str:
    """Parsing failures (unparsed, ambiguous, errors) and exact-match rate, published counts beside."""
    models, body = config_rows(t, parsing_cells, lambda r: f"{r['n_unparsed']} / {r['n_ambiguous']}")
    return ("Ours: unparsed, of which ambiguous (both answer families), errors, exact-match rate (%). Published: "
            "unparsed / ambiguous.\n\n"
            + markdown_table(["config", "unparsed", "ambiguous", "errors", "exact %", *model_names(models)], body))


def increase_cells(summary: dict[str, Any] | None) -> list[str]:
    """Our share of "increase" among parsed answers."""
    return [pct(None if summary is None else summary["increase_ratio"])]


@table_kind("response-distribution", runs=1)
def response_distribution(t: TableRequest) -> str:
    """Share of "increase" among parsed answers per config and on average, published shares beside."""
    models, body = config_rows(t, increase_cells, lambda r: pct(r["increase_ratio"]))
    run = t.run
    ours = mean_or_none([t.metric(run, c, "increase_ratio") for c in run.configs])
    pub = [mean(t.reference[(run.name, c, m)]["increase_ratio"] for c in run.configs) for m in models]
    body.append(["mean", pct(ours), *map(pct, pub)])
    return ('"increase" answers among parsed answers (%); 50 on a balanced split means no bias.\n\n'
            + markdown_table(["config", f"{t.model} (this run)", *model_names(models)], body))


@table_kind("source-clip-bias", runs=2, checks=(paired_configs,))
def source_clip_bias(t: TableRequest) -> str:
    """"increase" rate of a run and of a second run over the unmodified source clips, configs paired in order."""
    base, sources = t.runs
    pairs = list(zip(base.configs, sources.configs, strict=True))
    body = [[t.label(base), t.ours, *extremes({c: t.metric(base, c, "increase_ratio") for c in base.configs})],
            [t.label(sources), t.ours, *extremes({c: t.metric(sources, s, "increase_ratio") for c, s in pairs})]]
    for m in t.published_models(base):
        ratios = {c: t.reference[(base.name, c, m)]["increase_ratio"] for c in base.configs}
        body.append([t.label(base), MODEL_DISPLAY[m], *extremes(ratios)])
    detail = [[c, pct(t.metric(base, c, "increase_ratio")), pct(t.metric(sources, s, "increase_ratio"))] for c, s in pairs]
    return ('"increase" among parsed answers (%), main prompt. The published source-clip rates are not in the shipped '
            "reference data.\n\n" + markdown_table(["clips", "model", "avg", "max category", "min category"], body)
            + "\n\n" + markdown_table(["config", t.label(base), t.label(sources)], detail))


def published_mean(t: TableRequest, run: SuiteRun, model: str) -> str:
    """A published model's mean accuracy over a run's configs ("(k cat.)" when only k have a value)."""
    vals = [r["accuracy"] for c in run.configs if (r := t.published(run, c, model)) is not None]
    if not vals:
        return MISSING
    return pct(mean(vals)) + ("" if len(vals) == len(run.configs) else f" ({len(vals)} cat.)")


@table_kind("prompt-variants", runs=(1, None), checks=(same_configs,))
def prompt_variants(t: TableRequest) -> str:
    """Accuracy under each run's prompt variant per config; published means per model beside."""
    configs = t.run.configs
    ours = [[get_variant(run.prompt).name, *accuracy_cells(t, run, configs)] for run in t.runs]
    pub_runs = [r for r in t.runs if any((r.name, c, m) in t.reference for c in configs for m in MODEL_DISPLAY)]
    pub = [[MODEL_DISPLAY[m], *(published_mean(t, run, m) for run in pub_runs)] for m in MODEL_DISPLAY]
    return (f"### {t.model} (this run): accuracy (%)\n\n" + markdown_table(["prompt", "mean", *configs], ours)
            + "\n\n### Published: mean accuracy over categories (%)\n\n"
            + markdown_table(["model", *(get_variant(r.prompt).name for r in pub_runs)], pub))


@table_kind("paraphrase-questions", runs=0)
def paraphrase_questions(t: TableRequest) -> str:
    """The paraphrased questions and their answer words (SPEC §5); reads no samples."""
    body = [[c, f"paraphrase-{i}", q, f"{inc} / {dec}"] for c in PARAPHRASE_CONFIGS
            for i, (q, inc, dec) in enumerate(PARAPHRASES[c], start=1)]
    return ('Each question is followed by a blank line and `Answer with only one word: "{inc}" or "{dec}".` '
            "All nine are parsed with the one synonym parser.\n\n" + markdown_table(["config", "variant", "question", "words"], body))


def summary_cells(summary: dict[str, Any] | None) -> list[str]:
    """Our accuracy, "increase" ratio and unparsed count."""
    if summary is None:
        return [MISSING] * 3
    return [pct(summary["accuracy"]), pct(summary["increase_ratio"]), str(summary["n_unparsed"])]


def published_summary(r: dict[str, float] | None) -> str:
    """A published "acc / inc / unparsed" cell."""
    return MISSING if r is None else f"{pct(r['accuracy'])} / {pct(r['increase_ratio'])} / {r['n_unparsed']}"


@table_kind("paraphrase-metrics", runs=(2, None), checks=(covers_second,))
def paraphrase_metrics(t: TableRequest) -> str:
    """Accuracy, "increase" ratio and unparsed per prompt run and config, the first run (the baseline) first."""
    configs, variants = t.runs[1].configs, t.runs[1:]
    models = [m for m in MODEL_DISPLAY if any((r.name, c, m) in t.reference for r in variants for c in configs)]
    body = []
    for c in configs:
        for run in t.runs:
            pub = [published_summary(t.published(run, c, m)) for m in models]
            body.append([c, t.label(run), *summary_cells(t.inputs.summary(run.name, c)), *pub])
    return ("Ours: accuracy (%), increase ratio among parsed (%), unparsed. Published: the same three, "
            "`acc / inc / unparsed`.\n\n"
            + markdown_table(["config", "prompt", "acc", "inc.", "unparsed", *model_names(models)], body))


@table_kind("source-domain", runs=(1, None), checks=(same_configs,))
def source_domain(t: TableRequest) -> str:
    """Accuracy per config of runs on other source corpora (16 kHz), published models with all of them beside."""
    from vocalgrad_dataset.build.card import noop_text

    configs = t.run.configs
    body = [[t.label(run), t.ours, *accuracy_cells(t, run, configs)] for run in t.runs]
    for m in MODEL_DISPLAY:
        if not all((r.name, c, m) in t.reference for r in t.runs for c in configs):
            continue
        for run in t.runs:
            vals = [t.reference[(run.name, c, m)]["accuracy"] for c in configs]
            body.append([t.label(run), MODEL_DISPLAY[m], pct(mean(vals)), *map(pct, vals)])
    return f"{noop_text()}\n\n" + markdown_table(["source", "model", "avg", *configs], body)


@table_kind("macro-f1", runs=(1, None), checks=(answer_formats,))
def format_macro_f1(t: TableRequest) -> str:
    """Macro-F1 per category of yes/no and ternary format runs."""
    body = []
    for run in t.runs:
        vals = [None if (rows := t.inputs.rows(run.name, c)) is None else macro_f1(rows) for c in run.configs]
        body.append([t.label(run), pct(mean_or_none(vals)), *map(pct, vals)])
    return markdown_table(["format", "mean", *categories(t.run)], body)


def prediction_shares(t: TableRequest, run: SuiteRun) -> str:
    """One format run's prediction shares by clip type, averaged equally over its configs."""
    labels = sorted(resolve(run.configs[0]).spec.labels, key=PREDICTION_ORDER.index)
    per = [None if (rows := t.inputs.rows(run.name, c)) is None else prediction_distribution(rows, labels)
           for c in run.configs]
    types = list(CLIP_TYPES.values())
    body = [[pred, *(pct(mean_or_none([d[ty][pred] if d and ty in d else None for d in per])) for ty in types)]
            for pred in [*labels, "unparsed"]]
    return f"### {t.label(run)}\n\n" + markdown_table(["prediction", *types], body)


@table_kind("prediction-distribution", runs=(1, None), checks=(answer_formats,))
def prediction_distribution_table(t: TableRequest) -> str:
    """Prediction shares by clip type of yes/no and ternary format runs, averaged equally over categories."""
    return ("Share of each answer within each clip type (%), per category, then averaged equally over categories.\n\n"
            + "\n\n".join(prediction_shares(t, run) for run in t.runs))


def cross_matrix(t: TableRequest, cell: Callable[[SuiteRun, str], float | None]) -> str:
    """Rows: the audio's config; columns: each run's asked attribute."""
    asked = [get_variant(r.prompt).cross_category for r in t.runs]
    body = [[actual, *(pct(cell(run, actual)) for run in t.runs)] for actual in t.run.configs]
    return markdown_table(["audio \\ asked", *asked], body)


@table_kind("cross-attribute", runs=(1, None), checks=(same_configs, cross_attribute_prompts))
def cross_attribute(t: TableRequest) -> str:
    """Accuracy when the prompt asks about another category's attribute, as a matrix (the paper's Figure 8)."""
    parts = [f"### {t.model} (this run)\n\n" + cross_matrix(t, lambda run, a: t.metric(run, a, "accuracy"))]
    for m in MODEL_DISPLAY:
        if all((r.name, a, m) in t.reference for r in t.runs for a in t.run.configs):
            parts.append(f"### {MODEL_DISPLAY[m]} (published)\n\n"
                         + cross_matrix(t, lambda run, a, m=m: t.reference[(run.name, a, m)]["accuracy"]))
    asked = [get_variant(r.prompt).cross_category for r in t.runs]
    return ("Rows: the category whose attribute changes in the audio; columns: the attribute word asked "
            f"({', '.join(f'{c} = {attribute_word(c)}' for c in asked)}). Accuracy (%) against the audio's "
            "direction.\n\n" + "\n\n".join(parts))


# ---- Table 4 and Figure 4 (Table 12): fine-tuning on one category, tested on each (Sec. 5.4) -------------


def base_then_adapters(runs: Sequence[SuiteRun]) -> str | None:
    """The first run is the base model's (no adapter), every other one an adapter's (`trained:`) on its configs."""
    if runs[0].trained is not None:
        return f"run {runs[0].name!r} must be the base model's run (no trained: field)"
    bad = [r.name for r in runs[1:] if r.trained is None]
    return f"run {bad[0]!r} must name the category its adapter was trained on (trained:)" if bad else None


@table_kind("finetune-in-domain", runs=(2, None), checks=(base_then_adapters,))
def finetune_in_domain(t: TableRequest) -> str:
    """Per training category: the base model's accuracy on it, the adapter's, and the gain (Table 4's rows)."""
    base, body = t.run, []
    for run in t.runs[1:]:
        c = run.trained or ""
        before, after = t.metric(base, c, "accuracy"), t.metric(run, c, "accuracy")
        gain = f"{100 * (after - before):+.1f}" if before is not None and after is not None else MISSING
        body.append([c, pct(before), pct(after), gain])
    return ("Accuracy (%) on the test split of the category each adapter was trained on: the base model, the "
            "fine-tuned model, and the gain (points).\n\n"
            + markdown_table(["trained on", "base", "fine-tuned", "Δ"], body))


@table_kind("finetune-matrix", runs=(2, None), checks=(base_then_adapters,))
def finetune_matrix(t: TableRequest) -> str:
    """Rows: the base model, then each adapter by its training category; columns: the test categories."""
    configs = list(t.run.configs)
    body = [[label, *(pct(t.metric(run, c, "accuracy")) for c in configs)]
            for run, label in [(t.run, "base"), *((r, f"trained on {r.trained}") for r in t.runs[1:])]]
    return ("Accuracy (%) of each model on each category's test split; the diagonal is in-domain.\n\n"
            + markdown_table(["model \\ tested on", *configs], body))


# ---- Table 22: transfer of VocalGrad fine-tuning to emotion recognition (MELD, appendix C.13) ------------
MELD_CONFIG = "meld"


MeldRun = tuple[str, list[str], list[str | None], list[str], list[str]]  # label, gold, preds, labels, item ids


def meld_transfer_inputs(t: TableRequest) -> list[MeldRun | None]:
    """Per run: (label, gold, predictions, labels, ids) of its `meld` samples in item-id order (so that runs
    pair by item, whatever order their files hold), or None when they are missing."""
    out: list[MeldRun | None] = []
    for run in t.runs:
        rows = t.inputs.rows(run.name, MELD_CONFIG)
        if not rows:
            out.append(None)
            continue
        ordered = sorted(rows, key=lambda r: str(r["benchmark_clip_id"]))  # paired by item
        out.append((t.label(run), [str(r["gold"]) for r in ordered],
                    [None if r.get("error") else r.get("pred") for r in ordered], list(ordered[0]["options"]),
                    [str(r["benchmark_clip_id"]) for r in ordered]))
    return out


def paired_macro_f1_test(gold: Sequence[str], a: Sequence[str | None], b: Sequence[str | None],
                         labels: Sequence[str], samples: int = 1000, seed: int = 20260) -> tuple[float, float]:
    """(macro-F1(b) − macro-F1(a), two-sided paired-bootstrap p): both runs resampled with the same items; p is
    twice the smaller share of replicate differences on either side of 0 (capped at 1)."""
    import numpy as np

    from harness.classification import bootstrap_confusions, classification_metrics, scores_from_confusion

    k = len(labels)
    index = {lab: i for i, lab in enumerate(labels)}
    g = np.array([index[x] for x in gold])
    codes = [np.array([index.get(x, k) if x is not None else k for x in p]) for p in (a, b)]
    diff = (classification_metrics(gold, b, labels, samples=0)["macro_f1"]
            - classification_metrics(gold, a, labels, samples=0)["macro_f1"])
    reps = [np.asarray(scores_from_confusion(bootstrap_confusions(g, c, k, samples, seed))["macro_f1"]) for c in codes]
    d = reps[1] - reps[0]
    return diff, float(min(1.0, 2 * min((d <= 0).mean(), (d >= 0).mean())))


def _meld_rows(t: TableRequest, runs: list[MeldRun | None], labels: list[str]) -> tuple[list[list[str]], list[Any]]:
    """Per run: per-class P / R / F1, macro P / R, macro-F1 with its interval and accuracy; and its metrics."""
    from harness.classification import classification_metrics
    from harness.paper.transitions import macro

    body, metrics = [], []
    for run, data in zip(t.runs, runs, strict=True):
        if data is None:
            body.append([t.label(run), *[MISSING] * (3 * len(labels) + 4)])
            metrics.append(None)
            continue
        m = classification_metrics(data[1], data[2], data[3])
        metrics.append(m)
        body.append([data[0], *(pct(m[f"{x}_{lab}"]) for lab in labels for x in ("precision", "recall", "f1")),
                     pct(macro(m, labels, "precision")), pct(macro(m, labels, "recall")),
                     f"{pct(m['macro_f1'])} {interval(m, 'macro_f1')}",
                     pct(m["accuracy"])])
    return body, metrics


def _meld_paired(base: MeldRun, data: MeldRun, labels: list[str]) -> list[str]:
    """One adapter against the base on the same items: Δ macro-F1 with its bootstrap p, discordant counts and
    McNemar's exact p."""
    from harness.metrics import mcnemar_exact

    right_a = [p == g for p, g in zip(base[2], base[1], strict=True)]
    right_b = [p == g for p, g in zip(data[2], data[1], strict=True)]
    only_a = sum(a and not b for a, b in zip(right_a, right_b, strict=True))
    only_b = sum(b and not a for a, b in zip(right_a, right_b, strict=True))
    diff, p_boot = paired_macro_f1_test(base[1], base[2], data[2], labels)
    return [f"{data[0]} vs {base[0]}", f"{100 * diff:+.1f}", f"{p_boot:.3f}", f"{only_a} / {only_b}",
            f"{mcnemar_exact(only_a, only_b):.3f}"]


def _meld_against_base(t: TableRequest, runs: list[MeldRun | None], labels: list[str]) -> list[str]:
    """The paired tests and the prediction transitions of each adapter against the base (same items only)."""
    from harness.paper.transitions import PUBLISHED_TRANSITION, headline_transition, transition_table

    base, parts, tests, unpaired, moves = runs[0], [], [], [], []
    x, y, published_run, share = PUBLISHED_TRANSITION
    for run, data in zip(t.runs[1:], runs[1:], strict=True):
        if base is None or data is None:
            continue
        if data[4] != base[4] or data[1] != base[1]:  # paired statistics need the same items with the same gold
            unpaired.append(data[0])
            continue
        tests.append(_meld_paired(base, data, labels))
        moves.append(f"#### {data[0]} (from {base[0]})\n\n" + transition_table(base[2], data[2], labels))
        parts.append(f"{x.capitalize()} -> {y.capitalize()}, {data[0]}: {headline_transition(base[2], data[2], labels)} "
                     f"of the base's {x} predictions"
                     + (f" (published: {pct(share)} %)" if run.name == published_run else ""))
    out = []
    if tests:
        out.append("Paired tests against the base (same items): macro-F1 difference (points) with its paired-"
                   "bootstrap p (1,000 item resamples), and McNemar's exact test on per-item correctness "
                   "(items right only for the base / only for the adapter).\n\n"
                   + markdown_table(["comparison", "Δ macro-F1", "bootstrap p", "discordant", "McNemar p"], tests))
    if moves:
        out.append("Prediction transitions: of the items the base model predicts as the row's class, the share (%) "
                   "the tuned model predicts as the column's (the paper's statistic, appendix C.13).\n\n"
                   + "\n\n".join(parts) + ".\n\n" + "\n\n".join(moves))
    if unpaired:
        out.append(f"Not compared with the base (other items or gold labels): {', '.join(unpaired)}.")
    return out


@table_kind("meld-transfer", runs=(1, None))
def meld_transfer(t: TableRequest) -> str:
    """Per-class precision / recall / F1, macro precision, recall and F1 of each run on MELD (the base first), the
    published macro-F1 beside ours, and each adapter against the base: paired tests (McNemar, paired bootstrap)
    and the prediction transitions."""
    from harness.paper.transitions import published_rows

    runs = meld_transfer_inputs(t)
    labels = next((r[3] for r in runs if r is not None), [])
    head = ["model", *(f"{lab.capitalize()} {m}" for lab in labels for m in ("P", "R", "F1")), "macro-P", "macro-R",
            "macro-F1", "acc"]
    body, metrics = _meld_rows(t, runs, labels)
    published = published_rows([(run.name, t.label(run), m["macro_f1"] if m else None)
                                for run, m in zip(t.runs, metrics, strict=True)])
    parts = [markdown_table(head, body), "Published values (the paper's Table 22) beside ours:\n\n" + published,
             *_meld_against_base(t, runs, labels)]
    return ("Precision (P), recall (R) and F1 per emotion, macro precision and recall (unweighted means over the "
            "emotions) and macro-F1 (%) with its 95 % bootstrap interval; an unparsed answer is a miss of its true "
            "class.\n\n" + "\n\n".join(parts))
