"""The published values beside ours: camera_ready_direction_metrics.csv indexed by suite run name.

A published prediction file's path names its experiment, config and model; the prefixes below map each
experiment to the run of the suite (harness/paper/suite.yaml) that repeats it, so a table looks published
values up by (run name, config, model stem). A run of one's own has no published values unless its name
is one of these runs' names. Fine-tuning rows are not part of the suite and are left out.
"""

from __future__ import annotations

from harness.data import PUBLISHED_NAME
from harness.reference import camera_ready_rows

ReferenceIndex = dict[tuple[str, str, str], dict[str, float]]  # (run name, config, model stem) -> metrics

PUBLISHED_RUNS: tuple[tuple[str, str], ...] = (
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
PARAPHRASE_STEMS: dict[str, int] = {
    "rise_fall": 1, "intensity_increase_decrease": 2, "intensity_increasing_decreasing": 3,
    "tone_rise_fall": 1, "frequency_upward_downward": 2, "frequency_rise_decline": 3,
    "pace_faster_slower": 1, "tempo_increase_decrease": 2, "delivery_accelerate_decelerate": 3,
}  # fmt: skip


def reference_index() -> ReferenceIndex:
    """(run name, config, model stem) -> published metrics, for the runs of the paper's suite."""
    index: ReferenceIndex = {}
    config_of = {published: ours for ours, published in PUBLISHED_NAME.items()}
    for row in camera_ready_rows():
        path = row["path"]
        prefix, run = next(((p, r) for p, r in PUBLISHED_RUNS if path.startswith(p)), (None, None))
        if prefix is None or run is None:
            continue
        parts = path[len(prefix) :].split("/")
        config, model = parts[0], parts[-1].rsplit(".", 1)[0]
        if run == "paraphrase":
            run = f"paraphrase-{PARAPHRASE_STEMS[parts[1]]}"
        elif run == "cross-attribute":
            run = f"cross-attribute:{config_of[parts[1]]}"
        index[(run, config_of[config], model)] = published_metrics(row)
    return index


def published_metrics(row: dict[str, str]) -> dict[str, float]:
    """The counts and rates of one published prediction file (increase ratio NaN when none parsed)."""
    ratio = row["increase_ratio_parsed"]
    return {
        "n": int(row["n_expected"]), "accuracy": float(row["accuracy"]), "n_correct": int(row["n_correct"]),
        "n_unparsed": int(row["n_unparsed"]), "n_ambiguous": int(row["n_ambiguous"]), "n_error": int(row["n_error"]),
        "balanced_accuracy": float(row["balanced_accuracy"]),
        "increase_ratio": float(ratio) if ratio not in ("", None) else float("nan"),
    }  # fmt: skip
