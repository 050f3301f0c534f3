"""The data card (README.md with `configs:` YAML) written beside a Parquet build, and the category table."""

from __future__ import annotations

from pathlib import Path

from .buildinfo import build_section
from .categories import CATEGORIES, CATEGORY_NAMES
from .fileio import atomic_write_text
from .generate import BEEP_CATEGORIES, BEEP_PROMPT_VARIANT, GENERATOR_VERSION, noop_tiers
from .grid import FORMAT_LABELS, TIERS
from .sources.alternate import SAMPLE_RATE as ALTERNATE_RATE


def category_rows() -> list[dict[str, str]]:
    """One row per category: name, published name, attribute word, parameter and tier values."""
    rows = []
    for name in CATEGORY_NAMES:
        cat = CATEGORIES[name]
        tiers = " / ".join(f"{cat.tier_value(t):g}" for t in TIERS)
        fixed = "; ".join(f"{k} " + " / ".join(f"{cat.fixed(t)[k]:g}" for t in TIERS) for k in cat.fixed_keys if k != cat.tier_key)
        rows.append(
            {
                "config": name,
                "published name": cat.release_name,
                "attribute": cat.attribute,
                "parameter": cat.parameter,
                "low / mid / high": tiers + (f" ({fixed})" if fixed else ""),
                "schedule": "continuous" if cat.continuous else "50 ms steps",
            }
        )
    return rows


def category_table_markdown() -> str:
    """The category table as Markdown (README and `vocalgrad-dataset list --markdown` print this)."""
    header = ["config", "published name", "attribute", "parameter", "tier key", "low / mid / high", "schedule"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, row in zip(CATEGORY_NAMES, category_rows(), strict=True):
        key = CATEGORIES[name].tier_key
        cells = [row["config"], row["published name"], row["attribute"], row["parameter"], key, row["low / mid / high"], row["schedule"]]
        lines.append("| " + " | ".join(f"`{c}`" if i == 0 else c for i, c in enumerate(cells)) + " |")
    return "\n".join(lines)


def noop_text(sr: int = ALTERNATE_RATE) -> str:
    """Which tiers do nothing at a sample rate, computed from the generator itself (not hard-coded)."""
    found = [f"{name} {' and '.join(t)}" for name in CATEGORY_NAMES if (t := noop_tiers(CATEGORIES[name], sr))]
    if not found:
        return f"At {sr / 1000:g} kHz every tier changes the audio."
    return (
        f"At {sr / 1000:g} kHz (the loquacious and commonvoice-spontaneous sources) these tiers are no-ops: "
        f"{'; '.join(found)}. The published generator clamps the effective rate to the source rate, so those "
        "clips differ from the source only by the segment crossfades; they are kept (and the generator warns) "
        "so the grid and the ids stay those of the published variant."
    )


QUIRKS = f"""\
- Segment categories (speed, pitch, distortion, roughness, clarity) join 50 ms steps with a 5 ms
  crossfade that overlaps neighbours, so the speech span shrinks by ~10 %; this is part of the published
  stimuli. Speed additionally changes the span's length by the time-stretch.
- `onset_sec` / `offset_sec` give the speech span's position in the *output* clip.
- {noop_text()}
- Volume clips can clip at +18 dB; `clipped_ratio` records the fraction of hard-clipped samples.
- Noise is seeded per clip from sha256("42:{{benchmark_clip_id}}"), so every build is identical.
"""

VARIANTS = f"""\
- `beep-<category>` ({", ".join(BEEP_CATEGORIES)}): the beep ablation of SPEC §4, generated from 10
  synthetic 48 kHz sine tones (0.75 s silence, 2.10 s of 0.65·sin(2πft), 0.75 s silence; f = 700 ... 2050 Hz
  in 150 Hz steps; onset 0.75 s, offset 2.85 s), 240 clips per config, test only. **The published beep
  table was measured with the `{BEEP_PROMPT_VARIANT}` prompt** ("Does the {{attr}} of this audio clip increase
  or decrease over time?"), not the main prompt stored in the `prompt` column; evaluate with
  `--prompt {BEEP_PROMPT_VARIANT}` to compare with it.
- `<category>-yesno` (labels {" / ".join(FORMAT_LABELS["yesno"])}) and `<category>-ternary` (labels
  {" / ".join(FORMAT_LABELS["ternary"])}): the 2,400 augmented test clips plus the 100 unmodified source clips
  (id `item__clip__source`; label `no` / `constant`; `direction`, `curve`, `tier` = `none`; no parameter
  applied). Prompts: "Does the {{attr}} vary with time?" + `Answer with only one word: "yes" or "no".` and
  "How does the {{attr}} vary with time?" + `Answer with only one word: "increase", "decrease" or
  "constant".` Score with macro-F1 (the classes are unbalanced: 2,400 / 100).
- `<category>-source`: the 100 unmodified source clips alone with the main prompt (the source-clip
  "increase" bias measurement).
"""

SOURCES = {
    "vctk": "VCTK 0.80 (untrimmed 48 kHz `wav48/`), the frozen selection of the published release: official numbers.",
    "demo": "The embedded demo clips (CMU ARCTIC, CMU AN4 and LibriVox read speech, 16 kHz upsampled to 48 kHz: "
    "nothing above 8 kHz). For smoke tests and tutorials; not comparable with the published numbers.",
    "folder": "A user folder of WAV/FLAC files with a metadata CSV; onsets detected as in SPEC §1. Not official.",
    "beep": "10 synthetic 48 kHz sine tones (the beep ablation of SPEC §4); the clips match the published ones "
    "sample for sample.",
    "loquacious": "LoquaciousSet `clean` test (speechbrain/LoquaciousSet), the frozen 100 clips (50 F / 50 M) of "
    "the published alternative-source study, 16 kHz, test only; rows whose onset could not be detected use the "
    "whole clip (`onset_fallback = full_clip`).",
    "commonvoice-spontaneous": "Common Voice Spontaneous Speech 4.0 (20 clips each of cdo, cgg, kbd, qxp, shi; "
    "< 30 s), the frozen 100 clips of the published alternative-source study, decoded to 16 kHz mono, test only. "
    "Not English: the `language` tag of this card covers the VCTK release.",
}


def _yaml_configs(out_dir: Path) -> str:
    configs = sorted(p.name for p in out_dir.iterdir() if p.is_dir() and any(p.glob("*.parquet")))
    lines = ["configs:"]
    for name in configs:
        splits = sorted({f.name.split("-")[0] for f in (out_dir / name).glob("*.parquet")})
        lines.append(f"- config_name: {name}")
        lines.append("  data_files:")
        for split in splits:
            lines += [f"  - split: {split}", f'    path: "{name}/{split}-*.parquet"']
    if len(configs) > 1:
        splits = sorted({f.name.split("-")[0] for c in configs for f in (out_dir / c).glob("*.parquet")})
        lines += ["- config_name: all", "  data_files:"]
        for split in splits:
            lines += [f"  - split: {split}", f'    path: "*/{split}-*.parquet"']
    return "\n".join(lines)


def card_text(out_dir: Path, *, source: str) -> str:
    """README.md for a build folder: YAML header (license, configs) and the data card."""
    return f"""---
license: cc-by-4.0
pretty_name: VocalGrad
task_categories:
- audio-classification
language:
- en
tags:
- audio
- speech
- benchmark
- audio-language-models
{_yaml_configs(out_dir)}
---

# VocalGrad

Speech clips in which exactly one acoustic factor rises or falls over time; a model answers
"increase" or "decrease" (Ryu & Yanaka 2026). Generated by `vocalgrad-dataset` {GENERATOR_VERSION}.

Source: {SOURCES.get(source, source)}

Load: `datasets.load_dataset(<this folder or repo>, "pitch", split="test")` returns the standard
`Audio` column (mono, the source rate, PCM16) plus the metadata below.

## Categories and parameters

{category_table_markdown()}

24 conditions per source clip: tier (low, mid, high) x curve (linear, quad_first_flat, quad_last_flat,
jump) x direction (up = increase, down = decrease). Clip ids: `item__clip__curve__tier__direction`,
identical to the published release's `benchmark_clip_id`.

## Columns

`audio`, `benchmark_clip_id`, `category`, `attribute`, `prompt` (main prompt), `label`
(ClassLabel decrease/increase), `direction`, `curve`, `tier`, `parameter`, `param_start`, `param_end`
(the category's parameter as actually applied), `param_fixed` (JSON of per-tier constants),
`source_item_id`, `source_clip_id`, `speaker_id`, `source_text`, `onset_sec`, `offset_sec`,
`duration_sec`, `clipped_ratio`, `generator_version`. In yes/no and ternary configs `label` is the
format's ClassLabel (no/yes; decrease/increase/constant).

## Variant configs

{VARIANTS}
## Known quirks

{QUIRKS}
{build_section(out_dir)}## License

CC-BY-4.0 (VCTK is CC-BY-4.0; the demo clips, LoquaciousSet and Common Voice clips keep their own licences).
"""


def write_card(out_dir: Path, *, source: str) -> Path:
    """Write README.md atomically."""
    path = Path(out_dir) / "README.md"
    atomic_write_text(path, card_text(Path(out_dir), source=source))
    return path
