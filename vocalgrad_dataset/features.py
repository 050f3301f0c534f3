"""The column schema every VocalGrad config shares: one column list, from which the Arrow schema of a shard,
the card's `dataset_info` features and the `datasets.Features` of the loading script are all derived.

A build does not import `datasets` (~0.7 s of CPU per process, a third of a demo build's overhead): the
Arrow schema with its `huggingface` metadata and the card's YAML features are written here in the form
`datasets` itself writes them (tests/test_build_schema.py compares both with `datasets.Features`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from vocalgrad_dataset.grid import Recipe

if TYPE_CHECKING:
    import datasets
    import pyarrow as pa

STRING_COLUMNS = (
    "benchmark_clip_id", "category", "attribute", "prompt", "direction", "curve", "tier", "parameter",
    "param_fixed", "source_item_id", "source_clip_id", "speaker_id", "source_text",
)  # fmt: skip
FLOAT_COLUMNS = ("param_start", "param_end", "onset_sec", "offset_sec", "duration_sec", "clipped_ratio")
# The lexical-conflict configs add what the carrier's words claim and whether that matches the label:
# claim (increase | decrease | none), congruent (claim == label; null on neutral rows), template_id,
# voice_id, transcript.
CLAIM_COLUMNS = (("claim", "string"), ("congruent", "bool"), ("template_id", "string"), ("voice_id", "string"),
                 ("transcript", "string"))  # fmt: skip

# kind of a column: "audio" (datasets.Audio: struct of WAV bytes and path), "label" (datasets.ClassLabel of the
# format's labels, stored as int64) or a datasets.Value dtype ("string", "float64", "bool")
COLUMNS: tuple[tuple[str, str], ...] = (
    ("audio", "audio"),
    *((c, "string") for c in STRING_COLUMNS[:7]),
    ("label", "label"),
    *((c, "string") for c in STRING_COLUMNS[7:]),
    *((c, "float64") for c in FLOAT_COLUMNS),
    ("generator_version", "string"),
)


def main_recipe() -> Recipe:
    """The main question's recipe (the augmented clips, decrease / increase): the default of these functions."""
    from vocalgrad_dataset.categories import CATEGORY_NAMES
    from vocalgrad_dataset.tasks import config_spec

    return config_spec(CATEGORY_NAMES[0]).recipe


def columns(recipe: Recipe | None = None) -> tuple[tuple[str, str], ...]:
    """(name, kind) of every column of a config made by this recipe, in row order."""
    return COLUMNS + (CLAIM_COLUMNS if (recipe or main_recipe()).claims else ())


def label_names(recipe: Recipe | None = None) -> tuple[str, ...]:
    """The `label` ClassLabel's names: decrease/increase, no/yes or decrease/increase/constant."""
    return (recipe or main_recipe()).labels


def features_dict(recipe: Recipe | None = None, sampling_rate: int | None = None) -> dict[str, Any]:
    """`datasets.Features(...).to_dict()` of a config: what a shard's `huggingface` schema metadata holds."""
    out: dict[str, Any] = {}
    for name, kind in columns(recipe):
        if kind == "audio":  # datasets leaves out fields at their defaults
            out[name] = {**({"sampling_rate": sampling_rate} if sampling_rate is not None else {}), "_type": "Audio"}
        elif kind == "label":
            out[name] = {"names": list(label_names(recipe)), "_type": "ClassLabel"}
        else:
            out[name] = {"dtype": kind, "_type": "Value"}
    return out


def yaml_features(recipe: Recipe | None = None, sampling_rate: int | None = None) -> list[dict[str, Any]]:
    """The card's `dataset_info.features` list of a config (datasets' `Features._to_yaml_list()` form)."""
    out: list[dict[str, Any]] = []
    for name, kind in columns(recipe):
        if kind == "audio":
            dtype: Any = "audio" if sampling_rate is None else {"audio": {"sampling_rate": sampling_rate}}
        elif kind == "label":
            dtype = {"class_label": {"names": {str(i): n for i, n in enumerate(label_names(recipe))}}}
        else:
            dtype = kind
        out.append({"name": name, "dtype": dtype})
    return out


def arrow_schema(recipe: Recipe | None = None) -> pa.Schema:
    """The Arrow schema of a shard, with the `huggingface` metadata `datasets.Features.arrow_schema` adds."""
    import pyarrow as pa

    types = {"audio": pa.struct([("bytes", pa.binary()), ("path", pa.string())]), "label": pa.int64(),
             "string": pa.string(), "float64": pa.float64(), "bool": pa.bool_()}  # fmt: skip
    meta = json.dumps({"info": {"features": features_dict(recipe)}})
    return pa.schema([(name, types[kind]) for name, kind in columns(recipe)]).with_metadata({"huggingface": meta})


def vocalgrad_features(recipe: Recipe | None = None) -> datasets.Features:
    """Features of a VocalGrad row for the `datasets` loading script: the standard Audio column (source rate,
    PCM16 WAV) plus metadata. The `label` ClassLabel follows the recipe: decrease/increase, no/yes,
    or decrease/increase/constant (yes/no and ternary configs add the unmodified source clips)."""
    import datasets

    kinds = {"audio": lambda: datasets.Audio(), "label": lambda: datasets.ClassLabel(names=list(label_names(recipe)))}
    return datasets.Features({name: kinds[kind]() if kind in kinds else datasets.Value(kind) for name, kind in columns(recipe)})
