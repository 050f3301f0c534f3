"""`harness leaderboard validate SUB.json`: everything a leaderboard row claims is re-derived from its samples.

Checks, in order (every problem is reported, each naming the config and, where it helps, the clip):
schema and version; parser version (results.json and every row); split; clip ids against the dataset
(the frozen VCTK list for official runs, a config's own source for configs bound to one such as the
claims of `<category>-conflict`, the generator's ids for the demo source, the frozen item list of a
VoxParadox-lite config): none missing, none extra, none twice; every row consistent with its clip id
(category; for the kinds whose rows carry the grid condition also gold label, tier, curve, direction), with
the run (model, mode, prompt variant) and with itself (pred re-parsed from raw, or the sign of the choice
margin); the samples' sha256; and every metric of results.json recomputed from the samples (build_results,
which scores each config by its task kind). Conflict and MCQ rows are never ranked with the nine categories:
the site shows them in their own sections.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from harness.data import CONFIGS, GeneratorSource
from harness.kinds import GRID_GROUP, Kind, all_kinds, rows_kind, task_kind
from harness.leaderboard.schema import schema_errors
from harness.leaderboard.submit import samples_sha256
from harness.parsing import PARSER_VERSION, row_parser
from harness.prompts import get_variant
from harness.redact import redact
from harness.results import DEFAULT_MAX_ERROR_RATE, build_results, component_versions, error_summary
from vocalgrad_dataset import grid
from vocalgrad_dataset.tasks import config_spec, resolve

# Longest text a model field may hold (a 200,000-character name took the page 52 s to load); notes are prose.
MAX_TEXT = {"name": 120, "notes": 2000}
MAX_OTHER_TEXT = 300  # registry name, precision, revision, adapter, prompt variant, scoring mode
TOLERANCE = 1e-9  # recomputed floats may differ from the claimed ones by rounding only
MAX_PER_KIND = 3  # examples shown per kind of row problem


def load_submission(path: str | Path) -> dict[str, Any]:
    """A submission file as a dict (a clear error for a missing or non-JSON file)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no submission file {p}")
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{p}: not a JSON submission ({err})") from None
    except RecursionError:  # e.g. 100,000 nested [: no submission is that deep
        raise ValueError(f"{p}: not a submission (JSON nested too deeply)") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{p}: a submission is a JSON object, got {type(obj).__name__}")
    return obj


@cache
def expected_ids(source: str, split: str, config: str) -> tuple[str, ...]:
    """The clip ids a complete run of `config` must hold, from the dataset's ids alone (no audio)."""
    kind, _, name = source.partition(":")
    decl = resolve(config)
    if decl.family != "vocalgrad":  # a builder family's frozen item list (built data only)
        if kind in ("parquet", "release"):
            from vocalgrad_dataset.voxparadox.export import config_item_ids

            return tuple(config_item_ids(config, split))  # the frozen list (reversed controls: "-rev" ids)
        raise ValueError(f"cannot verify the clip ids of {config} from source {source!r}: {decl.family} configs "
                         "are evaluated from their build (`vocalgrad-dataset build`, then `harness eval --dataset`)")
    from vocalgrad_dataset.generate import config_ids, resolve_source

    own = resolve_source(config, None)  # the source a config is bound to or defaults to (claims, beep, vctk)
    if kind in ("parquet", "release"):
        return tuple(config_ids(config, split, own))  # built or released data must be the config's official ids
    if kind == "generate" and name in ("vctk", own):
        return tuple(config_ids(config, split, name))
    if kind == "generate" and name == "demo":
        return tuple(cid for u in GeneratorSource(split, "demo").units(config) for cid in u.clip_ids)
    raise ValueError(f"cannot verify the clip ids of source {source!r}: the leaderboard takes runs on the "
                     "official VCTK benchmark (generated, built or released), on a config's own source (claims "
                     "for -conflict configs) or on the demo source")


def _label_contradictions(r: Mapping[str, Any], config: str, cond: grid.Condition | None,
                          run: Mapping[str, Any]) -> list[str]:
    """What a row's labels and settings contradict: its clip id's condition (None: an unmodified source clip)
    and the label the config's recipe gives it, or the run's settings."""
    none = grid.NO_CONDITION
    where = (cond.tier, cond.curve, cond.direction) if cond is not None else (none, none, none)
    return _run_contradictions(r, config, run, [
        (r.get("gold") == _recipe_label(config, cond), "gold label contradicts the clip id"),
        ((r.get("tier"), r.get("curve"), r.get("direction")) == where, "tier/curve/direction contradict the clip id"),
    ])


def _follows_choice_margin(r: Mapping[str, Any]) -> bool:
    """A direction choices row's pred is the sign of its margin (None for a tie), and its raw the chosen word."""
    margin = r.get("margin")
    want = None if not isinstance(margin, int | float) or margin == 0 else (
        "increase" if margin > 0 else "decrease")
    words = r.get("answer_words") or []
    return not (r.get("pred") != want
                or (want and len(words) == 2 and r.get("raw") != words[0 if want == "increase" else 1]))


def _prediction_contradiction(r: Mapping[str, Any]) -> str | None:
    """Why a row's pred does not follow from the rest of the row (its error, margin or raw answer), if so."""
    pred = r.get("pred")
    if r.get("error"):
        return "error row carries a prediction" if pred is not None else None
    if r.get("mode") == "choices":
        if rows_kind(str(r.get("category")), [r]).per_row:  # its margin compares letters, not direction words
            return None
        return None if _follows_choice_margin(r) else "pred does not follow the choice margin"
    if pred != row_parser(r).parse(r.get("raw")):
        return "pred does not follow from the raw answer"
    return None


def _run_contradictions(r: Mapping[str, Any], config: str, run: Mapping[str, Any],
                        row_checks: Sequence[tuple[bool, str]] = ()) -> list[str]:
    """What a row contradicts: its config, `row_checks` (a grid row's clip id), or the run's settings."""
    checks = [
        (r.get("category") == config, f"category is not {config!r}"),
        *row_checks,
        ((r.get("model"), r.get("mode"), r.get("prompt_variant"))
         == (run.get("model"), run.get("mode"), run.get("prompt_variant")),
         "model/mode/prompt differ from the run's"),
    ]
    return [kind for holds, kind in checks if not holds]


def _recipe_label(config: str, cond: grid.Condition | None) -> str | None:
    """The gold label the config's recipe gives a clip of this condition (None where it has no such row)."""
    try:
        return config_spec(config).recipe.label(cond)
    except ValueError:
        return None


def _row_problem_kinds(r: Mapping[str, Any], config: str, run: Mapping[str, Any], parser_id: str,
                       grid_rows: bool = True) -> list[str]:
    """The kinds of problem one row has, in the order they are checked (the clip id's condition only for kinds
    whose rows carry it)."""
    if grid_rows:
        try:
            _, _, cond = grid.parse_any_clip_id(str(r.get("benchmark_clip_id")))
        except ValueError:
            return ["malformed clip id"]
        kinds = _label_contradictions(r, config, cond, run)
    else:
        kinds = _run_contradictions(r, config, run)
    if r.get("parser") != parser_id:  # the pred checks below assume the run's parser
        return [*kinds, f"parser {r.get('parser')!r} is not {parser_id!r} (parser version {PARSER_VERSION})"]
    contradiction = _prediction_contradiction(r)
    if contradiction is not None:
        kinds.append(contradiction)
    if bool(r.get("parsed")) != (r.get("pred") is not None):
        kinds.append("parsed flag contradicts pred")
    return kinds


def _row_problems(config: str, rows: Sequence[Mapping[str, Any]], run: Mapping[str, Any]) -> list[str]:
    """Rows that contradict their clip id, the run's settings, or their own raw answer."""
    kind = rows_kind(config, rows)
    grid_rows = kind.grid
    parser_id = _parser_id(kind, config, str(run.get("prompt_variant")))
    found: dict[str, list[str]] = {}
    for r in rows:
        for problem in _row_problem_kinds(r, config, run, parser_id, grid_rows):
            found.setdefault(problem, []).append(str(r.get("benchmark_clip_id")))
    return [f"{config}: {len(ids)} row(s) where {problem} (e.g. {', '.join(ids[:MAX_PER_KIND])})"
            for problem, ids in found.items()]


def _parser_id(kind: Kind, config: str, variant: str) -> str:
    """The parser id every row of a config must carry: its kind's (MCQ, fixed questions), else the variant's."""
    if kind.parser_id is not None:
        return kind.parser_id
    return get_variant(variant).vocabulary(config).parser.id


def _diff(claimed: Any, actual: Any, where: str, out: list[str]) -> None:
    """Append 'where: claimed X but the samples give Y' for every leaf that differs."""
    if isinstance(actual, Mapping):
        if not isinstance(claimed, Mapping):
            out.append(f"{where}: claimed {claimed!r} but the samples give an object")
            return
        for k in actual:
            _diff(claimed.get(k), actual[k], f"{where}.{k}", out)
        return
    if isinstance(actual, float) or isinstance(claimed, float):
        a = None if actual is None or (isinstance(actual, float) and math.isnan(actual)) else float(actual)
        c = None if claimed is None or (isinstance(claimed, float) and math.isnan(claimed)) else claimed
        same = a is None and c is None or (a is not None and isinstance(c, int | float)
                                           and abs(float(c) - a) <= TOLERANCE * max(1.0, abs(a)))
        if not same:
            out.append(f"{where}: claimed {c!r} but the samples give {a!r}")
        return
    if claimed != actual:
        out.append(f"{where}: claimed {claimed!r} but the samples give {actual!r}")


def _text_problems(model: Mapping[str, Any]) -> list[str]:
    """Model fields longer than the leaderboard shows (MAX_TEXT)."""
    return [f"model.{k}: {len(v):,} characters, at most {MAX_TEXT.get(k, MAX_OTHER_TEXT):,} allowed"
            for k, v in model.items() if isinstance(v, str) and len(v) > MAX_TEXT.get(k, MAX_OTHER_TEXT)]


def _run_problems(sub: Mapping[str, Any]) -> list[str]:
    """What the run's record contradicts: the leaderboard's parser, split and redaction, and the submission."""
    results, samples, model = sub["results"], sub["samples"], sub["model"]
    run = results["config"]
    errors = []
    parser = component_versions(results).get("parser")
    if str(parser) != PARSER_VERSION:
        errors.append(f"results.json: parser version {parser!r}, but the leaderboard "
                      f"scores with parser version {PARSER_VERSION}")
    args = run.get("model_args") or {}
    if isinstance(args, Mapping) and redact(args) != args:
        errors.append("results.json: config.model_args holds a secret value (e.g. an API key); submit again with "
                      "`harness leaderboard submit`, which redacts it")
    if run.get("split") != "test":
        errors.append(f"results.json: split {run.get('split')!r}; the leaderboard ranks the test split")
    if (model["scoring_mode"], model["prompt_variant"]) != (run.get("mode"), run.get("prompt_variant")):
        errors.append(f"model metadata says {model['scoring_mode']}/{model['prompt_variant']} but the run was "
                      f"{run.get('mode')}/{run.get('prompt_variant')}")
    if set(samples) != set(results["results"]):
        errors.append(f"samples hold configs {sorted(samples)} but results.json has {sorted(results['results'])}")
    return errors


def _config_set_problem(samples: Mapping[str, Any]) -> str | None:
    """Why the submission's configs cannot be checked further (unknown ones, or none), if so."""
    unknown = sorted(c for c in samples if not _taken(c))
    if unknown:
        own = ", ".join(k.name for k in all_kinds() if k.group != GRID_GROUP)
        return (f"unknown configs {unknown} (known: {', '.join(CONFIGS)}, and the declared configs of a kind with "
                f"its own results group: {own})")
    if not samples:
        return "the submission holds no config"
    return None


def _taken(config: str) -> bool:
    """True for the nine categories and for declared configs (canonical names) of a kind with its own results
    group (lexical conflict, multiple choice, ...), shown in their own sections, never ranked with the nine."""
    if config in CONFIGS:
        return True
    try:
        return resolve(config).name == config and task_kind(config).group != GRID_GROUP
    except ValueError:
        return False


def _coverage_problems(config: str, rows: Sequence[Mapping[str, Any]], want: Sequence[str],
                       run: Mapping[str, Any]) -> list[str]:
    """Clip ids the rows miss, hold outside the dataset, or hold twice."""
    ids = [str(r.get("benchmark_clip_id")) for r in rows]
    have = set(ids)
    missing = [i for i in want if i not in have]
    extra = sorted(have - set(want))
    twice = sorted(i for i, n in Counter(ids).items() if n > 1)
    listening = run.get("mode") == "listening"  # humans answer a balanced sample, each clip several times
    errors = []
    if missing and not listening:
        errors.append(f"{config}: {len(missing)} of {len(want)} clips missing (e.g. {', '.join(missing[:MAX_PER_KIND])})")
    if extra:
        errors.append(f"{config}: {len(extra)} clip ids not in the dataset (e.g. {', '.join(extra[:MAX_PER_KIND])})")
    if twice and not listening:
        errors.append(f"{config}: clips listed more than once (e.g. {', '.join(twice[:MAX_PER_KIND])})")
    return errors


def _metric_problems(results: Mapping[str, Any], samples: Mapping[str, Any]) -> list[str]:
    """Every metric of results.json that the samples, scored again, do not give."""
    # In the run's own config order (--configs noise,volume): the group's config list and its float sums follow it.
    samples = {**{c: samples[c] for c in results["results"] if c in samples}, **samples}
    recomputed = build_results(samples, run_config=results["config"], task_configs=results["configs"],
                               n_original={c: results["n-samples"].get(c, {}).get("original", 0) for c in samples},
                               date=results["date"])
    errors: list[str] = []
    for key in ("results", "groups", "metrics", "group_metrics", "breakdowns", "n-samples", "incomplete"):
        _diff(results.get(key), recomputed[key], key, errors)
    failed = error_summary(samples, DEFAULT_MAX_ERROR_RATE)  # the leaderboard's own bar, whatever the run set
    if failed:
        errors.append(f"the run is incomplete: {failed}; the leaderboard ranks runs whose answers came back")
    return errors


def _dtype(value: Any) -> str | None:
    """A dtype as torch names it (bf16 -> bfloat16, torch.float32 -> float32); None when not given."""
    from harness.settings import DTYPE_ALIASES

    if value in (None, ""):
        return None
    text = str(value).strip().lower().removeprefix("torch.")
    return DTYPE_ALIASES.get(text, text)


def _claim_problems(sub: Mapping[str, Any]) -> list[str]:
    """What the submission's claims (model.precision, results.json model_info "not_paper_protocol")
    contradict in the run's own record: the dtype the model reported, the --dtype / --tf32 /
    --attn-implementation it was given (config.model_args). The ‡ mark follows the record, never a claim."""
    info = sub["results"].get("model_info") or {}
    args = sub["results"]["config"].get("model_args") or {}
    loaded, asked, claimed = _dtype(info.get("dtype")), _dtype(args.get("dtype")), _dtype(sub["model"].get("precision"))
    opt_ins = [str(x) for x in info.get("not_paper_protocol") or []]
    errors = []
    if loaded and asked and loaded != asked:
        errors.append(f"results.json: model_info dtype {loaded} but the run was given --dtype {asked}")
    if loaded and claimed and claimed in DTYPE_NAMES and claimed != loaded:
        errors.append(f"model.precision {claimed} but the run's model reported dtype {loaded} (model_info)")
    listed = [x.split()[1] for x in opt_ins if x.startswith("dtype ") and len(x.split()) > 1]
    if loaded and any(d != loaded for d in listed):
        errors.append(f"results.json: not_paper_protocol names dtype {listed[0]} but model_info dtype is {loaded}")
    if args.get("tf32") and not any(x.startswith("tf32") for x in opt_ins):
        errors.append("results.json: the run was given --tf32 but not_paper_protocol does not say so")
    attn = args.get("attn_implementation")
    if attn and attn != "sdpa" and not any(x.startswith("attn_implementation") for x in opt_ins):
        errors.append(f"results.json: the run was given --attn-implementation {attn} but not_paper_protocol "
                      "does not say so")
    return errors


DTYPE_NAMES = frozenset({"float32", "bfloat16", "float16", "float64"})


def validate_submission(sub: Mapping[str, Any]) -> list[str]:
    """Every problem found in a submission; [] means it is valid."""
    errors = schema_errors(sub)
    if errors:
        return errors
    results, samples = sub["results"], sub["samples"]
    run = results["config"]
    errors = _text_problems(sub["model"]) + _run_problems(sub) + _claim_problems(sub)
    stop = _config_set_problem(samples)
    if stop is not None:
        return [*errors, stop]
    for config, rows in samples.items():
        try:
            want = expected_ids(str(run.get("source")), str(run.get("split")), config)
        except ValueError as err:
            errors.append(str(err))
            break
        errors += _coverage_problems(config, rows, want, run)
        errors += _row_problems(config, rows, run)
        if sub["samples_sha256"].get(config) != samples_sha256(rows):
            errors.append(f"{config}: samples altered after submission (sha256 mismatch)")
    return errors + _metric_problems(results, samples)


def validate_file(path: str | Path) -> tuple[dict[str, Any], list[str]]:
    """(submission, problems) for a submission file."""
    sub = load_submission(path)
    return sub, validate_submission(sub)
