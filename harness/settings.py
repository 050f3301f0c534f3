"""The settings and command-line flags every model-driving command shares.

`harness eval`, `vocalgrad-paper`, `probing.extract` and `vocalgrad-finetune` each describe a run as one typed
dataclass built from the pieces below (which model, which rows) instead of restating them, and build their
command lines from the same argument groups, so a flag means the same thing with the same default and the
same validation everywhere. Nothing here imports torch: `--help` stays instant.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.sampling import parse_limit

MODES: tuple[str, ...] = ("generate", "choices")
DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")
DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}
ATTN_IMPLEMENTATIONS: tuple[str, ...] = ("sdpa", "eager", "flash_attention_2")
GENERATOR_SPLITS: tuple[str, ...] = ("train", "test")  # a mapped dataset may name any other
AUTO_BATCH_START = 64  # `--batch-size auto` starts here; the model's OOM back-off halves it until it fits
S = TypeVar("S")


@dataclass(kw_only=True)
class ModelSettings:
    """Which model to build and how (registry name or `package.module:Factory`, factory keywords)."""

    model: str
    model_args: dict[str, Any] = field(default_factory=dict)  # --model-arg KEY=VALUE, passed to the factory
    batch_size: int | str = 8  # prompts per model call, or "auto" (start at AUTO_BATCH_START, halve on OOM)
    adapter: str | None = None  # a LoRA adapter (finetune/ output or Hub id) attached to the model
    device: str | None = None  # None: this process's accelerate device
    dtype: str | None = None  # None: the family's choice (bfloat16 on GPU, float32 on CPU unless pinned)
    tf32: bool = False  # TF32 float32 matmuls (a speed opt-in: not the paper's protocol)
    attn_implementation: str | None = None  # None: the family's (sdpa); flash_attention_2 is an opt-in

    def model_kwargs(self) -> dict[str, Any]:
        """The factory keywords: --model-arg values plus --adapter / --device / --dtype when given."""
        out = dict(self.model_args)
        for name in ("adapter", "device", "dtype", "tf32", "attn_implementation"):
            value = getattr(self, name)
            if value is None or value is False:
                continue
            if name in out and out[name] != value:
                raise ValueError(f"--{name} {value!r} contradicts --model-arg {name}={out[name]!r}; give it once")
            out[name] = value
        return out


@dataclass(kw_only=True)
class SourceSettings:
    """The generator source rows are rendered from (SPEC §1: vctk, or demo, folder, beep, ...)."""

    source: str = "vctk"
    data_dir: str | None = None  # corpus root for the source


@dataclass(kw_only=True)
class RowSettings(SourceSettings):
    """Where benchmark rows come from: the generator's split, or a Parquet build / published release."""

    source: str | None = None  # None: the configs' own (claims for -conflict configs, beep for beep-*), else vctk
    split: str | None = "test"  # None (--split not given): a published benchmark's own split, else test
    dataset: str | None = None  # a Parquet build or published-release directory instead of generating
    kind: str | None = None  # a task kind: --dataset is a foreign dataset mapped onto its row fields
    columns: str | None = None  # "field=COL,..." of that --dataset (a kind's fields; MELD's layout needs none)
    hub_config: str | None = None  # the Hub dataset's configuration (datasets' `name`) of a mapped --dataset
    where: str | None = None  # "COLUMN=V1|V2,...": only the mapped rows whose columns hold one of the values

    def open_rows(self, configs: Sequence[str] = ()) -> Any:
        """The harness.data.RowSource these settings name; with no --source, the one `configs` default to
        (recorded in `source`)."""
        from harness.published import published_source

        published = published_source(configs, self.dataset, self.split)
        if published is not None:
            if any(v is not None for v in (self.kind, self.columns, self.hub_config, self.where)):
                raise ValueError(f"--configs {published.benchmark} declares its columns, filter and Hub "
                                 "configuration: drop --kind / --columns / --where / --hub-config")
            self.split = published.split
            return published
        self.split = self.split or "test"
        if self.kind is not None or self.columns is not None:
            return self.mapped_rows()
        if self.where is not None or self.hub_config is not None:
            raise ValueError("--where and --hub-config narrow a mapped --dataset: give --kind and --columns too")
        if self.split not in GENERATOR_SPLITS:
            raise ValueError(f"--split {self.split}: VocalGrad's builds and generator have the splits "
                             f"{' and '.join(GENERATOR_SPLITS)} (any split name is for --kind/--columns or a "
                             "published benchmark's --configs)")
        from harness.data import open_source
        from vocalgrad_dataset.generate import default_source

        if self.source is None and self.dataset is None:  # built items (VoxParadox-lite) have no corpus
            from vocalgrad_dataset.tasks import resolve

            self.source = default_source([c for c in map(resolve, configs) if c.rows == "generate"])
        return open_source(self.split, self.source or "vctk", self.data_dir, self.dataset)


    def mapped_rows(self) -> Any:
        """A foreign --dataset read as the rows of --kind, its columns mapped by --columns."""
        from harness.kinds import get_kind

        if self.kind is None:
            raise ValueError("--columns maps a --dataset onto a task kind's fields: give --kind too")
        kind = get_kind(self.kind)
        if kind.mapped_source is None:
            raise ValueError(f"--kind {kind.name}: this kind reads no mapped dataset (kinds that do: "
                             f"{', '.join(k.name for k in _mapped_kinds())})")
        if self.dataset is None:
            raise ValueError(f"--kind {kind.name} maps the columns of --dataset PATH_OR_REPO: give --dataset too")
        extra = {k: v for k, v in (("hub_config", self.hub_config), ("where", parse_where(self.where)))
                 if v is not None}
        return kind.mapped_source(self.dataset, self.split, self.columns, **extra)


def parse_where(text: str | None) -> dict[str, list[str]] | None:
    """--where "COLUMN=V1|V2,COLUMN2=V" as {column: accepted values}; None when not given."""
    if text is None:
        return None
    out: dict[str, list[str]] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        column, sep, values = (x.strip() for x in part.partition("="))
        if not sep or not column or not values:
            raise ValueError(f"--where: expected COLUMN=VALUE[|VALUE...], got {part!r}")
        out[column] = [v.strip() for v in values.split("|")]
    return out


def _mapped_kinds() -> list[Any]:
    from harness.kinds import all_kinds

    return [k for k in all_kinds() if k.mapped_source is not None]


def deprecated_mapping(values: dict[str, Any], ns: argparse.Namespace) -> None:
    """Fold the one-release aliases `--mcq-columns C` (= --kind mcq --columns C) and `--task-kind K` (= --kind K)
    into `values`, with one deprecation line each; refuse them beside a --kind or --columns that says otherwise."""
    from harness.kinds.choice import MCQ

    for flag, kind, columns in (("--mcq-columns", MCQ.name, getattr(ns, "mcq_columns", None)),
                                ("--task-kind", getattr(ns, "task_kind", None), None)):
        if kind is None or (flag == "--mcq-columns" and columns is None):
            continue
        print(f"warning: {flag} is deprecated; use --kind {kind}" + (" --columns ..." if columns else ""),
              file=sys.stderr)
        for name, value in (("kind", kind), ("columns", columns)):
            if value is None:
                continue
            if values.get(name) not in (None, value):
                raise ValueError(f"{flag} contradicts --{name} {values[name]}: give one of them")
            values[name] = value


def settings_record(settings: Any) -> dict[str, Any]:
    """A settings dataclass as a JSON-able dict for records, with secret model arguments redacted."""
    from harness.redact import redact

    out = dataclasses.asdict(settings)
    for name in ("kind", "columns", "hub_config", "where"):  # only a run of a mapped dataset has these to record
        if out.get(name, "") is None:
            del out[name]
    if isinstance(out.get("model_args"), dict):
        out["model_args"] = redact(out["model_args"])
    return out


def derive(cls: type[S], settings: Any, **overrides: Any) -> S:
    """A `cls` settings object taking every field it shares with `settings`, then `overrides`."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    shared = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.name in names}
    return cls(**{**shared, **overrides})


def settings_from_args(cls: type[S], ns: argparse.Namespace, **overrides: Any) -> S:
    """A `cls` settings object from parsed arguments: every dataclass field found in the namespace."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values = {k: v for k, v in vars(ns).items() if k in names}
    if "kind" in names:
        deprecated_mapping(values, ns)
    if isinstance(values.get("model_args"), list):  # --model-arg pairs, in order (a later one wins)
        values["model_args"] = dict(values["model_args"])
    return cls(**{**values, **overrides})


# ---- argparse types ------------------------------------------------------------------------------------
_NEXT_PAIR = re.compile(r",(?=\s*[A-Za-z_][\w.-]*=)")  # a comma that starts another KEY=


def parse_model_arg(item: str) -> list[tuple[str, Any]]:
    """(key, value) pairs from "KEY=VALUE" or lm-eval's "K1=V1,K2=V2"; values are read as JSON where they
    parse (true, 8, "x", [1, 2]), else kept as text."""
    pairs = []
    for part in _NEXT_PAIR.split(item):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--model-arg expects KEY=VALUE, got {item!r}")
        try:
            pairs.append((key.strip(), json.loads(value)))
        except json.JSONDecodeError:
            pairs.append((key.strip(), value))
    return pairs


def _argtype(parse: Any, name: str) -> Any:
    """An argparse type from a parser that raises ValueError, keeping its message as argparse's one line."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    convert.__name__ = name
    return convert


def parse_batch_size(text: str) -> int | str:
    """A batch size: an integer >= 1 or "auto"."""
    if text.strip() == "auto":
        return "auto"
    if text.strip().isdigit() and int(text) >= 1:
        return int(text)
    raise ValueError(f"a number >= 1 or 'auto', got {text!r}")


def parse_configs(text: str) -> list[str]:
    """Comma-separated config names, e.g. "volume,noise" (checked against the registry where used)."""
    configs = [c.strip() for c in text.split(",") if c.strip()]
    if not configs:
        raise ValueError(f"expected comma-separated config names, got {text!r}")
    return configs


model_arg_type = _argtype(parse_model_arg, "KEY=VALUE")
batch_size_type = _argtype(parse_batch_size, "batch size")
configs_type = _argtype(parse_configs, "configs")
limit_type = _argtype(parse_limit, "limit")


# ---- argument groups -------------------------------------------------------------------------------------
def add_model_arguments(p: argparse.ArgumentParser, *, batch_size: int | None = 8,
                        batch_help: str = "prompts per model call", adapter: bool = True) -> None:
    """--model, --model-arg, --batch-size, --adapter, --device, --dtype (fields of ModelSettings).

    batch_size=None leaves --batch-size to the caller (fine-tuning, where it is the recipe's batch);
    adapter=False leaves out --adapter (fine-tuning starts from the base model)."""
    g = p.add_argument_group("model")
    g.add_argument("--model", required=True,
                   help="registry name (see `harness list-models`) or package.module:Factory")
    g.add_argument("--model-arg", "--model-args", dest="model_args", type=model_arg_type, action="extend", default=[],
                   metavar="KEY=VALUE", help="keyword for the model factory, e.g. pretrained=ORG/ID or "
                                             "revision=SHA (value read as JSON when it parses); repeatable")
    if batch_size is not None:
        g.add_argument("--batch-size", type=batch_size_type, default=batch_size,
                       help=f"{batch_help}, or 'auto': start at {AUTO_BATCH_START} and halve on out-of-memory "
                            "(default: %(default)s)")
    if adapter:
        g.add_argument("--adapter", default=None, help="LoRA adapter (finetune/ output directory or Hub id) to attach")
    g.add_argument("--device", default=None, help="torch device (default: this process's accelerate device)")
    g.add_argument("--dtype", default=None, choices=DTYPES, type=lambda v: DTYPE_ALIASES.get(v, v),
                   help="weights dtype, or its short name bf16 / fp16 / fp32 (default: the family's; bfloat16 on "
                        "GPU, float32 on CPU; another than the protocol's is recorded as not the paper's protocol)")
    g.add_argument("--tf32", action="store_true",
                   help="TF32 for float32 matmuls on Ampere+ GPUs (faster, ~3 decimal digits; not the paper's "
                        "protocol)")
    g.add_argument("--attn-implementation", default=None, choices=ATTN_IMPLEMENTATIONS,
                   help="attention kernel of transformers models (default: the family's, sdpa; another is not "
                        "the paper's protocol)")


def add_source_arguments(p: argparse.ArgumentParser, *, what: str = "rows", default: str | None = "vctk") -> Any:
    """--source, --data-dir (fields of SourceSettings); returns the group for more row flags."""
    g = p.add_argument_group("data")
    said = ("%(default)s" if default else "the configs' own: claims for -conflict configs, beep for beep-*, "
            "else vctk")
    g.add_argument("--source", default=default,
                   help=f"generator source of the {what}: vctk (official), demo, claims, folder, beep, loquacious, "
                        f"commonvoice-spontaneous or package.module:Factory (default: {said})")
    g.add_argument("--data-dir", default=None, help="corpus root for --source (e.g. the VCTK-Corpus folder)")
    return g


def kind_fields_help() -> str:
    """The kinds that read a mapped dataset and their fields ("mcq (audio, question, ...; optional ...)")."""
    parts = []
    for k in _mapped_kinds():
        required, optional = k.columns or ((), ())
        parts.append(f"{k.name} ({', '.join(required)}; optional {', '.join(optional)})")
    return "; ".join(parts)


def add_row_arguments(p: argparse.ArgumentParser, *, split_required: bool = False) -> None:
    """--source, --data-dir, --split, --dataset (fields of RowSettings)."""
    g = add_source_arguments(p, default=None)
    if split_required:
        g.add_argument("--split", required=True, choices=("train", "test"), help="which split's clips")
    else:
        g.add_argument("--split", default=None,
                       help="train or test (default: test); a mapped or published dataset: any split name "
                            "(default: its declared split, else test)")
    g.add_argument("--dataset", default=None,
                   help="a Parquet build (vocalgrad-dataset build) or published-release folder instead of "
                        "generating; with --kind and --columns, any dataset of that kind (folder, file or Hub id)")
    g.add_argument("--kind", default=None, metavar="KIND",
                   help="the task kind a foreign --dataset is read as: " + kind_fields_help())
    g.add_argument("--columns", default=None, metavar="FIELD=COLUMN,...",
                   help="which --dataset column holds each of the kind's fields (a MELD-layout folder needs none)")
    g.add_argument("--where", default=None, metavar="COLUMN=VALUE[|VALUE...],...",
                   help="a mapped --dataset: only the rows whose columns hold one of the values (a subset filter)")
    g.add_argument("--hub-config", default=None, metavar="NAME",
                   help="a mapped --dataset read from the Hub: its configuration (subset) name")
    g.add_argument("--mcq-columns", default=None, metavar="FIELD=COLUMN,...", help=argparse.SUPPRESS)
    g.add_argument("--task-kind", default=None, help=argparse.SUPPRESS)  # both: one release as aliases
