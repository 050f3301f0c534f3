"""The data card (README.md with `configs:` YAML) written beside a Parquet build, and the category table."""

from __future__ import annotations

import copy
import io
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vocalgrad_dataset.build.info import SHARD_RE, build_section
from vocalgrad_dataset.categories import CATEGORIES, CATEGORY_NAMES
from vocalgrad_dataset.cli.info import package_version
from vocalgrad_dataset.fileio import atomic_write_text
from vocalgrad_dataset.generate import BEEP_PROMPT_VARIANT, GENERATOR_VERSION, noop_tiers
from vocalgrad_dataset.grid import TIERS, Recipe
from vocalgrad_dataset.sources.alternate import SAMPLE_RATE as ALTERNATE_RATE
from vocalgrad_dataset.tasks import config_spec, expand_specs, published_name


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
- `beep-<category>` ({", ".join(s.category.name for s in expand_specs("beep-all"))}): the beep ablation of SPEC §4, generated from 10
  synthetic 48 kHz sine tones (0.75 s silence, 2.10 s of 0.65·sin(2πft), 0.75 s silence; f = 700 ... 2050 Hz
  in 150 Hz steps; onset 0.75 s, offset 2.85 s), 240 clips per config, test only. **The published beep
  table was measured with the `{BEEP_PROMPT_VARIANT}` prompt** ("Does the {{attr}} of this audio clip increase
  or decrease over time?"), not the main prompt stored in the `prompt` column; evaluate with
  `--prompt {BEEP_PROMPT_VARIANT}` to compare with it.
- `<category>-yesno` (labels {" / ".join(config_spec("pitch-yesno").labels)}) and `<category>-ternary` (labels
  {" / ".join(config_spec("pitch-ternary").labels)}): the 2,400 augmented test clips plus the 100 unmodified source clips
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


# The paper as SPEC names it (Ryu & Yanaka 2026); the published release is on the Hub.
CITATION_BIBTEX = r"""@misc{ryu2026vocalgrad,
  title  = {{VocalGrad}: Evaluating Acoustic Perception in Audio Language Models},
  author = {Ryu and Yanaka},
  year   = {2026},
  note   = {Published release: \url{https://huggingface.co/datasets/ynklab/vocalgrad}}
}"""

# source -> (the card's `license:` tag, the licence line of its clips). The generated clips are derived from
# the source recordings, so the source's terms travel with them.
SOURCE_LICENCES: dict[str, tuple[str, str]] = {
    "vctk": ("cc-by-4.0", "VCTK 0.80 (CSTR, University of Edinburgh): CC-BY-4.0; the published VocalGrad release "
             "(`ynklab/vocalgrad`) is CC-BY-4.0 as well."),
    "demo": ("other", "CMU ARCTIC clips: the CMU ARCTIC licence (free use, notice kept; `COPYING.cmu_arctic`); "
             "CMU AN4 clips: BSD-2 (Debian pocketsphinx test data, `COPYRIGHT.pocketsphinx-testdata`); LibriVox "
             "readings: public domain. The files ship in `vocalgrad_dataset/data/demo/`."),
    "beep": ("cc-by-4.0", "Synthetic sine tones made by this package: no third-party rights; CC-BY-4.0 like the "
             "published release."),
    "loquacious": ("other", "LoquaciousSet (`speechbrain/LoquaciousSet`): the terms on its dataset card, and those "
                   "of the corpus each clip comes from (Common Voice, VoxPopuli, Libriheavy, People's Speech, YODAS)."),
    "commonvoice-spontaneous": ("cc0-1.0", "Common Voice Spontaneous Speech 4.0 (Mozilla Common Voice): CC0-1.0."),
    "folder": ("other", "Your own files: the licence you hold for them (set `license:` above accordingly)."),
}
OTHER_LICENCE = ("other", "The licence of the plugin source's recordings (see its documentation).")

# Sources whose clips all have one rate: the first clip of a config says it. Others are checked shard by shard.
FIXED_RATE_SOURCES = ("vctk", "demo", "beep", "loquacious", "commonvoice-spontaneous")


def long_name(config: str) -> str | None:
    """The config under the category's published long name (`voice_pitch`, `background_noise-ternary`,
    `beep-voice_pitch`), or None when that is the config's own name."""
    alias = published_name(config)
    return None if alias == config else alias


def _config_dirs(out_dir: Path) -> list[str]:
    return sorted(p.name for p in out_dir.iterdir() if p.is_dir() and any(p.glob("*.parquet")))


def _shards_by_split(config_dir: Path) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for f in sorted(config_dir.glob("*.parquet")):
        m = SHARD_RE.fullmatch(f.name)
        out.setdefault(m["split"] if m else f.name.split("-")[0], []).append(f)
    return out


def _first_clip_rate(shard: Path) -> int | None:
    """Sample rate of a shard's first clip, read from its WAV header: a buffered reader decodes the first data
    page of the audio column, not the whole column chunk (~50 ms less per card)."""
    import pyarrow.parquet as pq

    try:
        batch = next(pq.ParquetFile(shard, pre_buffer=False, buffer_size=1 << 16).iter_batches(batch_size=1, columns=["audio"]))
        audio = batch.column(0)[0]["bytes"].as_buffer()
        head = audio[:28].to_pybytes()
        if head[:4] == b"RIFF" and head[8:16] == b"WAVEfmt ":  # the canonical header the build writes
            return struct.unpack("<I", head[24:28])[0]
        import soundfile as sf

        return int(sf.info(io.BytesIO(audio.to_pybytes())).samplerate)
    except (OSError, StopIteration, KeyError, TypeError, RuntimeError, ValueError, AttributeError):
        return None


def sampling_rate(shards: Sequence[Path], source: str) -> int | None:
    """The one sample rate of a config's clips; None when they differ or cannot be read (no resampling claim)."""
    files = list(shards[:1]) if source in FIXED_RATE_SOURCES else list(shards)
    rates = {_first_clip_rate(f) for f in files}
    return rates.pop() if len(rates) == 1 else None


def _split_sizes(by_split: dict[str, list[Path]]) -> tuple[dict[str, tuple[int, int]], int]:
    """split -> (bytes uncompressed, rows) from the Parquet footers, and the files' total size."""
    import pyarrow.parquet as pq

    out, download = {}, 0
    for split, files in by_split.items():
        n_bytes = n_rows = 0
        for f in files:
            meta = pq.ParquetFile(f).metadata
            n_rows += meta.num_rows
            n_bytes += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
            download += f.stat().st_size
        out[split] = (n_bytes, n_rows)
    return out, download


def _dataset_info(recipe: Recipe | None, by_split: dict[str, list[Path]], rate: int | None) -> dict[str, Any]:
    """A config's `dataset_info` entry as datasets' DatasetInfo._to_yaml_dict() gives it (features with the Audio
    sampling rate, splits with num_examples, sizes), without importing datasets."""
    from vocalgrad_dataset.features import yaml_features

    sizes, download = _split_sizes(by_split)
    return {
        "features": yaml_features(recipe, rate),
        "splits": [{"name": name, "num_bytes": n_bytes, "num_examples": n_rows}
                   for name, (n_bytes, n_rows) in sorted(sizes.items())],
        "download_size": download,
        "dataset_size": sum(b for b, _ in sizes.values()),
    }  # fmt: skip


def _dataset_info_yaml(infos: dict[str, dict[str, Any]]) -> dict[str, Any] | list[dict[str, Any]]:
    """The card's `dataset_info:` as DatasetInfosDict.to_dataset_card_data writes it: one entry as a mapping
    (config_name first unless "default"), several as a list sorted by config name, config_name first."""
    # own copies: a config and its long name share one info, and shared objects would become YAML anchors
    if len(infos) == 1:
        name, info = next(iter(infos.items()))
        return copy.deepcopy(info) if name == "default" else {"config_name": name, **copy.deepcopy(info)}
    return [{"config_name": name, **copy.deepcopy(info)} for name, info in sorted(infos.items())]


def card_metadata(out_dir: Path, *, source: str) -> str:
    """The card's YAML header: tags, `configs:` (every config, again under its published long name, and
    `all` over the nine categories) and `dataset_info:` (features with the Audio sampling rate, splits with
    num_examples), in the form datasets' and huggingface_hub's card serialisers write them."""
    configs: list[dict[str, Any]] = []
    infos: dict[str, dict[str, Any]] = {}
    main: dict[str, dict[str, list[Path]]] = {}
    rates: set[int | None] = set()
    for name in _config_dirs(out_dir):
        by_split = _shards_by_split(out_dir / name)
        rate = sampling_rate([f for fs in by_split.values() for f in fs], source)
        info = _dataset_info(config_spec(name).recipe, by_split, rate)
        data_files = [{"split": s, "path": f"{name}/{s}-*.parquet"} for s in sorted(by_split)]
        for config_name in filter(None, (name, long_name(name))):  # own lists: no YAML anchors in the card
            configs.append({"config_name": config_name, "data_files": [dict(d) for d in data_files]})
            infos[config_name] = info
        if name in CATEGORY_NAMES:  # `all` holds the nine categories only: they share one schema
            main[name] = by_split
            rates.add(rate)
    if len(main) > 1:
        splits = sorted({s for by_split in main.values() for s in by_split})
        configs.append({"config_name": "all", "data_files": [
            {"split": s, "path": [f"{name}/{s}-*.parquet" for name, by_split in main.items() if s in by_split]}
            for s in splits]})
        merged = {s: [f for by_split in main.values() for f in by_split.get(s, [])] for s in splits}
        infos["all"] = _dataset_info(None, merged, rates.pop() if len(rates) == 1 else None)
    licence = SOURCE_LICENCES.get(source, OTHER_LICENCE)[0]
    # the Hub asks `license: other` to name the licence (license_name); the card's License section states it
    other = {"license_name": re.sub(r"[^a-z0-9-]+", "-", f"vocalgrad-{source}-sources".lower())} \
        if licence == "other" else {}
    meta: dict[str, Any] = {
        "language": ["en"], "license": licence, "task_categories": ["audio-classification"],
        "pretty_name": "VocalGrad", **other, "tags": ["audio", "speech", "benchmark", "audio-language-models"],
        "configs": configs,
    }  # fmt: skip
    if infos:
        meta["dataset_info"] = _dataset_info_yaml(infos)
    return card_yaml(meta)


def card_yaml(meta: dict[str, Any]) -> str:
    """YAML of the card header as huggingface_hub's DatasetCardData(...).to_yaml() writes it (keys in the order
    its fields are set: language, license, task_categories, pretty_name, then the extra keys; no None values;
    own copies, so no anchors), without importing huggingface_hub; libyaml's emitter when PyYAML has it (the
    same text: tests/test_build_schema.py compares both with DatasetCardData's)."""
    import yaml

    data = copy.deepcopy({k: v for k, v in meta.items() if v is not None})
    return yaml.dump(data, Dumper=getattr(yaml, "CDumper", yaml.Dumper), sort_keys=False, allow_unicode=True).strip()


def licence_lines(source: str) -> str:
    """The licence section: this build's source first, then every built-in source for reference."""
    own = SOURCE_LICENCES.get(source, OTHER_LICENCE)[1]
    others = "\n".join(f"- `{name}`: {line}" for name, (_, line) in SOURCE_LICENCES.items() if name != source)
    return f"This build (source `{source}`): {own}\n\nThe other sources, for builds made from them:\n\n{others}"


def load_line(out_dir: Path) -> str:
    """The card's load example, naming a config this build holds (and `all` only when it holds two or more
    of the nine categories, as `card_metadata` declares it)."""
    built = _config_dirs(out_dir)
    first = built[0] if built else "pitch"
    split = next(iter(sorted(_shards_by_split(out_dir / first))), "test") if built else "test"
    long = long_name(first)
    line = (f'Load: `datasets.load_dataset(<this folder or repo>, "{first}", split="{split}")` returns the standard\n'
            "`Audio` column (mono, the source rate, PCM16) plus the metadata below.")
    if long:
        line += f' The published long name works as a config name too (`"{long}"`).'
    if sum(name in CATEGORY_NAMES for name in built) > 1:
        line += " `all` is the categories of this build together."
    return line


def card_text(out_dir: Path, *, source: str) -> str:
    """README.md for a build folder: YAML header (license, configs) and the data card."""
    return f"""---
{card_metadata(out_dir, source=source).rstrip()}
---

# VocalGrad

Speech clips in which exactly one acoustic factor rises or falls over time; a model answers
"increase" or "decrease" (Ryu & Yanaka 2026). Built by `vocalgrad-dataset` {package_version()} (generator
{GENERATOR_VERSION}, the version of the published stimuli, stored in the `generator_version` column).

Source: {SOURCES.get(source, source)}

{load_line(out_dir)}

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

{licence_lines(source)}

## Citation

```bibtex
{CITATION_BIBTEX}
```
"""


def write_card(out_dir: Path, *, source: str) -> Path:
    """Write README.md atomically."""
    path = Path(out_dir) / "README.md"
    atomic_write_text(path, card_text(Path(out_dir), source=source))
    return path
