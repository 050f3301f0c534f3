"""Extract probing features (SPEC §6) from any AudioLM that exposes hidden states, one forward per batch.

Representations, stored under "<name>/<layer>" keys:
- `mel/0`: the model-independent reference (16 kHz mel power, n_fft 1024, hop 256, 128 mels, fmax 8000,
  dB relative to the clip's max), 16-segment pooled -> 2,048 dims.
- `encoder/<k>`: encoder-only sources (Whisper): every encoder layer over the clip's frames, pooled.
- `pre_llm/0`: audio after encoder and adapter, before the decoder, pooled.
- `late_llm/<n>`: the last decoder layer at the audio positions, pooled.
- `text/<k>`: the state at the output position (the one predicting the answer) for every decoder layer.
- `pos_<p>/<k>`: position-wise states at the chosen layers: a1..a4 (last audio token of each audio
  quarter), `attribute` (last token of the attribute word) and `query-2`/`query-1` (last two tokens of the
  turn's last text, i.e. the question's end in audio-first prompts). The output position is `text/<k>`.

Pooling: boundaries linspace(0, L, 17); segment k averages frames [floor(b_k), floor(b_k+1)). When L < 16
some segments are empty; an empty segment takes the frame under its midpoint (nearest-frame upsampling),
so every clip yields 16 segments. L = 0 (no audio frames at all) is an error naming the clip.

    python -m probing.extract --model whisper-tiny-en --configs volume --split train --source demo --out DIR
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from harness.data import RowSource, SourceUnit, attribute_word
from harness.kinds import row_kind
from harness.models.pooling import (  # QUARTERS, quarter_ends: importable from here as before they moved
    N_SEGMENTS,
    QUARTERS,  # noqa: F401
    quarter_ends,  # noqa: F401
    quarter_positions,
    segment_matrix,
)
from harness.models.protocol import AudioLM, HiddenStates, ModelError, Prompt
from harness.models.registry import check_protocol, load_model
from harness.prompts import Variant, build_prompt, get_variant
from harness.redact import public
from harness.settings import (
    ModelSettings,
    RowSettings,
    add_model_arguments,
    add_row_arguments,
    configs_type,
    settings_from_args,
)
from probing.store import FORMAT, FeatureWriter, config_hash
from vocalgrad_dataset.cli.argtypes import positive_int
from vocalgrad_dataset.tasks import resolve

log = logging.getLogger(__name__)

MEL = {"sr": 16000, "n_fft": 1024, "hop_length": 256, "n_mels": 128, "fmax": 8000.0}
F16_MAX = float(np.finfo(np.float16).max)  # features are stored as float16
TEXT_POSITIONS = ("attribute", "query-2", "query-1")


def pool_segments(x: np.ndarray, n_segments: int = N_SEGMENTS) -> np.ndarray:
    """(L, d) -> (n_segments * d,) segment means, concatenated in time order."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"pool_segments expects (frames, dim), got shape {x.shape}")
    return (segment_matrix(x.shape[0], n_segments) @ x.astype(np.float64)).astype(np.float32).reshape(-1)


def mel_frames(audio: np.ndarray, sampling_rate: int) -> np.ndarray:
    """(frames, 128) mel power in dB relative to the clip's maximum (SPEC §6 reference features)."""
    import librosa

    from harness.audio import mono_at
    from harness.models.protocol import AudioClip

    y = mono_at(AudioClip(audio, sampling_rate), MEL["sr"])
    spec = librosa.feature.melspectrogram(y=y, sr=MEL["sr"], n_fft=MEL["n_fft"], hop_length=MEL["hop_length"],
                                          n_mels=MEL["n_mels"], fmax=MEL["fmax"], power=2.0)
    return librosa.power_to_db(spec, ref=np.max).T.astype(np.float32)


def default_layers(n_layers: int) -> list[int]:
    """Position-wise layers when none are chosen: 0, n/4, n/2, 3n/4 and n (all of them for tiny models)."""
    return sorted({round(i * n_layers / 4) for i in range(5)})


def resolve_layers(spec: str | None, n_layers: int) -> list[int]:
    """Layers from "all", "0,14,-1" (negative counts from the last) or None (default_layers)."""
    if spec is None:
        return default_layers(n_layers)
    if spec.strip() == "all":
        return list(range(n_layers + 1))
    out = []
    for part in spec.split(","):
        try:
            k = int(part)
        except ValueError:
            raise ValueError(f"--layers: {part!r} is not an integer (use e.g. 0,14,-1 or all)") from None
        k = k + n_layers + 1 if k < 0 else k
        if not 0 <= k <= n_layers:
            raise ValueError(f"--layers: layer {part} is outside 0..{n_layers}")
        out.append(k)
    return sorted(set(out))


def clip_features(audio: dict[str, Any], hs: HiddenStates, layers: Sequence[int] | None,
                  clip_id: str = "") -> dict[str, np.ndarray]:
    """Every representation of one clip from its audio and its single-prompt HiddenStates."""
    feats = {"mel/0": pool_segments(mel_frames(audio["array"], int(audio["sampling_rate"])))}
    if hs.encoder:
        enc = hs.encoder[0]
        for k in range(enc.shape[0]):
            feats[f"encoder/{k}"] = _pooled(enc[k], "encoder", clip_id)
    if hs.positions and hs.positions[0]:
        feats.update(_compact_features(hs, layers, clip_id))
    elif hs.decoder:
        feats.update(_decoder_features(hs, layers, clip_id))
    elif hs.pre_llm_audio and not hs.encoder:
        feats["pre_llm/0"] = _pooled(hs.pre_llm_audio[0], "pre-LLM audio", clip_id)
    return {k: np.asarray(v, dtype=np.float32).reshape(-1) for k, v in feats.items()}


def _pooled(x: np.ndarray, what: str, clip_id: str) -> np.ndarray:
    if len(x) == 0:
        raise ModelError(f"no {what} frames to pool", clip_id)
    return pool_segments(x)


def _decoder_features(hs: HiddenStates, layers: Sequence[int] | None, clip_id: str) -> dict[str, np.ndarray]:
    """Full states (every decoder layer at every position), reduced on the host to what the compact path keeps."""
    dec, audio_pos = hs.decoder[0], np.asarray(hs.audio_positions[0])
    means = {"pre_llm": _pooled(hs.pre_llm_audio[0], "pre-LLM audio", clip_id),
             "late_llm": _pooled(dec[-1][audio_pos], "audio-position", clip_id)}
    named = {"output": hs.output_position[0], **quarter_positions(audio_pos),
             **(hs.text_positions[0] if hs.text_positions else {})}
    return _position_features({name: dec[:, pos] for name, pos in named.items()}, means, layers)


def _compact_features(hs: HiddenStates, layers: Sequence[int] | None, clip_id: str) -> dict[str, np.ndarray]:
    """States reduced on the device (harness.models.pooling): the kept positions' layers and the segment means."""
    if not (hs.pooled and hs.pooled[0]):
        raise ModelError("no pre-LLM audio frames to pool", clip_id)
    return _position_features(hs.positions[0], hs.pooled[0], layers)


def _position_features(at: dict[str, np.ndarray], means: dict[str, np.ndarray],
                       layers: Sequence[int] | None) -> dict[str, np.ndarray]:
    """pre_llm, late_llm, text and pos_ features from every layer at each named position ("output" first,
    then a1..a4 and the text positions), (n_layers + 1, d) each, and the segment means."""
    n = at["output"].shape[0] - 1
    feats = {"pre_llm/0": means["pre_llm"], f"late_llm/{n}": means["late_llm"]}
    for k in range(n + 1):
        feats[f"text/{k}"] = at["output"][k]
    for k in layers if layers is not None else default_layers(n):
        for name in (m for m in at if m != "output"):
            feats[f"pos_{name}/{k}"] = at[name][k]
    return feats


@dataclass(kw_only=True)
class ExtractSettings(ModelSettings, RowSettings):
    """What to extract, from which rows, with which model (the shared settings layer), into which directory."""

    configs: list[str]
    out: str
    split: str  # no default: train and test features are extracted separately
    prompt: str = "default"
    layers: str | None = None  # position-wise layers: "all", "0,14,-1", or None for default_layers
    units_per_shard: int = 4  # source clips (24 rows each) per shard: the resume granularity
    limit_units: int | None = None  # first N source clips per config (smoke runs)


def model_revision(model: AudioLM) -> str:
    """The weights' identity (pinned in every extraction): the wrapper's revision, else the commit its
    checkpoint resolved to, else its model id marked unversioned."""
    info = model.provenance()
    value = info.get("revision") or info.get("commit_sha")
    return str(value) if value else f"{info.get('model_id', model.name)} (unversioned)"


def probe_prompt(row: dict[str, Any], variant: Variant) -> Prompt:
    """The row's prompt, with meta["attribute"] naming the attribute word its text actually contains."""
    prompt, _ = build_prompt(row, variant)
    if variant.base == "paraphrase":
        word = None  # paraphrases name no attribute word ("loudness", "tone", ...)
    elif variant.base == "cross-attribute":
        word = attribute_word(variant.cross_category)
    elif (kind := row_kind(row)).probe_word is not None:  # an item's own question: the kind knows its word
        word = kind.probe_word(row)
    else:
        word = row.get("attribute") or attribute_word(row["category"])
    return replace(prompt, meta={**prompt.meta, "attribute": word})


def _chunks(units: Sequence[SourceUnit], size: int) -> Iterator[list[SourceUnit]]:
    for i in range(0, len(units), size):
        yield list(units[i : i + size])


def extract_config(model: AudioLM, source: RowSource, config: str, settings: ExtractSettings,
                   variant: Variant) -> Path:
    """Extract (or resume) one config of one split; returns its manifest path."""
    from vocalgrad_dataset.progress import progress

    layers_spec = settings.layers
    units = source.units(config)
    if settings.limit_units is not None:
        units = units[: settings.limit_units]
    pinned = {
        "format": FORMAT, "model": settings.model, "revision": model_revision(model), "adapter": settings.adapter,
        "prompt_variant": variant.name, "split": settings.split, "config": config,
        "source": source.description, "data_dir": settings.data_dir, "layers": layers_spec,
        "pooling": {"segments": N_SEGMENTS, "boundaries": "floor(linspace(0, L, 17))"}, "mel": MEL,
        # Only when set, so extractions made before they were pinned keep their hash (and resume).
        **({"dtype": settings.dtype} if settings.dtype else {}),
        **({"model_args": public(settings.model_args)} if public(settings.model_args) else {}),
    }
    # The unit list is not pinned: a run started with --limit-units can be resumed further, or in full.
    header = {**pinned, "config_hash": config_hash(pinned), "model_id": getattr(model, "model_id", settings.model)}
    folder = Path(settings.out) / settings.split / config
    writer = FeatureWriter(folder, header)
    writer.manifest["n_units"] = len(units)
    todo = [u for u in units if u.key not in writer.done_units]
    if todo:
        writer.manifest["complete"] = False  # e.g. resumed with a larger --limit-units
    bar = progress(total=len(units), initial=len(units) - len(todo), desc=f"{settings.split}/{config}", unit="source clip",
               disable=None)
    compact = bool(getattr(model, "supports_compact_hidden", False))
    for chunk in _chunks(todo, settings.units_per_shard):
        rows = list(source.rows(config, chunk))
        prompts = [probe_prompt(r, variant) for r in rows]
        writer.manifest.setdefault("prompt_example", prompts[0].text if prompts else "")
        # compact where the wrapper can: only the kept positions and segment means leave the device
        items = model.hidden_items(prompts, compact=True) if compact else model.hidden_items(prompts)
        kept_rows, feats, errors = [], [], []
        expected = set(writer.manifest["representations"]) or None
        for row, prompt, item in zip(rows, prompts, items, strict=True):
            # outside the per-clip try: a layer the model lacks stops the run at its first clip, before any
            # shard is written, instead of a warning per clip and a "complete" extraction of nothing
            layers = _layers_of(item, layers_spec)
            try:
                if isinstance(item, ModelError):
                    raise item
                one = clip_features(row["audio"], item, layers, prompt.clip_id)
                bad = sorted(k for k, v in one.items() if not np.isfinite(v).all() or np.abs(v).max() > F16_MAX)
                if bad:  # e.g. a reduced-precision overflow: left out and listed, never stored
                    raise ModelError(f"non-finite or beyond-float16 features in {', '.join(bad[:3])}")
                expected = expected or set(one)
                if set(one) != expected:  # e.g. the attribute token was found in other clips but not here
                    raise ModelError(f"representations {sorted(set(one) ^ expected)} differ from the other clips'")
                feats.append(one)
                kept_rows.append(row)
            except (ModelError, ValueError) as err:
                log.warning("%s: %s", prompt.clip_id, err)
                errors.append({"benchmark_clip_id": prompt.clip_id, "error": str(err)})
        stacked = {k: np.stack([f[k] for f in feats]) for k in feats[0]} if feats else {}
        writer.write([u.key for u in chunk], kept_rows, stacked, errors)
        bar.update(len(chunk))
    bar.close()
    writer.finish()
    n_err = len(writer.manifest["errors"])
    if n_err:
        log.warning("%s/%s: %d clip(s) failed and were left out (listed in the manifest)", settings.split, config, n_err)
    return writer.path


def _layers_of(item: HiddenStates | ModelError, spec: str | None) -> list[int] | None:
    """The layers to store for one clip's states (None: no decoder states); ValueError for a layer out of range."""
    if isinstance(item, ModelError):
        return None
    if item.positions and item.positions[0]:
        return resolve_layers(spec, item.positions[0]["output"].shape[0] - 1)
    if not item.decoder:
        return None
    return resolve_layers(spec, item.decoder[0].shape[0] - 1)


def run_extract(settings: ExtractSettings, model: AudioLM | None = None,
                source: RowSource | None = None) -> list[Path]:
    """Extract every requested config; returns the manifest paths."""
    configs = [resolve(c) for c in settings.configs]
    variant = get_variant(settings.prompt)
    if settings.units_per_shard < 1:
        raise ValueError("--units-per-shard must be >= 1")
    Path(settings.out).mkdir(parents=True, exist_ok=True)  # a file or read-only --out fails before the model loads
    source = source or settings.open_rows(configs)
    if model is None:
        model = load_model(settings, require=["hidden_states"])  # checks the protocol itself
    else:
        check_protocol(model, settings.model)
    return [extract_config(model, source, c, settings, variant) for c in configs]


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `python -m probing.extract` (fields of ExtractSettings)."""
    p = argparse.ArgumentParser(prog="python -m probing.extract", description=__doc__.splitlines()[0],
                                epilog="Example: python -m probing.extract --model whisper-tiny-en --configs volume "
                                       "--source demo --split train --out runs/probe")
    add_model_arguments(p)
    add_row_arguments(p, split_required=True)
    g = p.add_argument_group("extraction")
    g.add_argument("--configs", type=configs_type, required=True, help="comma-separated configs, e.g. volume,noise")
    g.add_argument("--out", required=True, help="extraction directory (resumed if it exists)")
    g.add_argument("--prompt", default="default", help="prompt variant (SPEC §5), e.g. audio_first (default: %(default)s)")
    g.add_argument("--layers", default=None,
                   help="position-wise layers: all | 0,14,-1 (default: 0, n/4, n/2, 3n/4, n)")
    g.add_argument("--units-per-shard", type=positive_int, default=4,
                   help="source clips per shard, the resume granularity (default: %(default)s)")
    g.add_argument("--limit-units", type=positive_int, default=None, help="first N source clips per config")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m probing.extract`."""
    from vocalgrad_dataset.cli.info import path_error

    ns = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        for path in run_extract(settings_from_args(ExtractSettings, ns)):
            print(f"wrote {path}")
    except (ValueError, FileNotFoundError, ModelError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # --out a file, or read-only
        if err.filename is None:
            raise
        print(f"error: {path_error(err)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
