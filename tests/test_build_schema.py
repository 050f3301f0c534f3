"""A build writes what `datasets` would have written, without importing it: the shard schema and its
`huggingface` metadata, the card's dataset_info, the Arrow columns and the WAV bytes (issue 24's overhead cut)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml
from datasets.info import DatasetInfosDict
from huggingface_hub import DatasetCardData

from vocalgrad_dataset.build import arrowrows, card
from vocalgrad_dataset.build.arrowrows import rows_table
from vocalgrad_dataset.cli import main as cli
from vocalgrad_dataset.features import arrow_schema, features_dict, vocalgrad_features, yaml_features
from vocalgrad_dataset.generate import iter_config_rows, wav_bytes
from vocalgrad_dataset.sources import get_source
from vocalgrad_dataset.tasks import config_spec

REPO = Path(__file__).resolve().parents[1]
# one config of each recipe: augmented, augmented + sources (yes/no, ternary), sources, claims, reversed claims
FORMATS = ("pitch", "pitch-yesno", "pitch-ternary", "pitch-source", "pitch-conflict", "pitch-conflict-reversed")


def R(config: str):  # noqa: N802 - the recipe of a config
    return config_spec(config).recipe


@pytest.mark.parametrize("fmt", FORMATS)
def test_arrow_schema_is_datasets_own(fmt: str) -> None:
    theirs = vocalgrad_features(R(fmt)).arrow_schema
    ours = arrow_schema(R(fmt))
    assert ours.equals(theirs, check_metadata=True)
    assert ours.metadata == theirs.metadata  # the same JSON bytes: shards stay byte-identical


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rate", [None, 16000, 48000])
def test_card_features_are_datasets_own(fmt: str, rate: int | None) -> None:
    features = vocalgrad_features(R(fmt))
    features["audio"] = datasets.Audio(sampling_rate=rate)
    assert features_dict(R(fmt), rate) == features.to_dict()
    assert yaml_features(R(fmt), rate) == features._to_yaml_list()


def _old_dataset_info(fmt: object, by_split: dict[str, list[Path]], rate: int | None) -> datasets.DatasetInfo:
    """The card's dataset_info as it was made before (datasets' own DatasetInfo)."""
    sizes, download = card._split_sizes(by_split)
    features = vocalgrad_features(fmt)
    features["audio"] = datasets.Audio(sampling_rate=rate)
    split_dict = datasets.SplitDict()
    for name, (n_bytes, n_rows) in sorted(sizes.items()):
        split_dict.add(datasets.SplitInfo(name=name, num_bytes=n_bytes, num_examples=n_rows))
    return datasets.DatasetInfo(features=features, splits=split_dict, download_size=download,
                                dataset_size=sum(b for b, _ in sizes.values()))


def _old_yaml(infos: dict[str, datasets.DatasetInfo]) -> object:
    data = DatasetCardData()
    DatasetInfosDict(infos).to_dataset_card_data(data)
    return data["dataset_info"]


def _hub_yaml(meta: dict) -> str:
    """The card header as it was written before: huggingface_hub's DatasetCardData and its to_yaml()."""
    data = DatasetCardData(**{k: v for k, v in meta.items() if k != "dataset_info"})
    if "dataset_info" in meta:
        data["dataset_info"] = meta["dataset_info"]
    return data.to_yaml()


@pytest.mark.parametrize("source", ["demo", "vctk", "commonvoice-spontaneous"])
def test_card_metadata_equals_datasets_serialiser(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # two formats (ternary adds the source rows and a third label) and a config with its published long name
    for config in ("volume", "volume-ternary", "volume-source"):
        assert cli(["build", "--config", config, "--split", "test", "--source", "demo", "--out", str(tmp_path), "--quiet"]) == 0
    ours = card.card_metadata(tmp_path, source=source)  # the source names the licence tags only
    with monkeypatch.context() as m:
        m.setattr(card, "_dataset_info", _old_dataset_info)
        m.setattr(card, "_dataset_info_yaml", _old_yaml)
        m.setattr(card, "card_yaml", _hub_yaml)
        theirs = card.card_metadata(tmp_path, source=source)
    assert ours == theirs
    infos = yaml.safe_load(ours)["dataset_info"]
    assert [i["config_name"] for i in infos] == sorted(i["config_name"] for i in infos)
    assert {i["config_name"] for i in infos} >= {"volume", "volume-ternary", "volume-source"}
    ternary = next(i for i in infos if i["config_name"] == "volume-ternary")
    assert ternary["features"][0] == {"name": "audio", "dtype": {"audio": {"sampling_rate": 48000}}}
    assert ternary["splits"] == [{"name": "test", "num_bytes": ternary["dataset_size"], "num_examples": 75}]


def test_card_yaml_wraps_and_escapes_as_huggingface_hub() -> None:
    long = "a long value with: colons, 'quotes', \u00e9 and more words " * 4  # wrapped past 80 columns
    meta = {"language": ["en"], "license": "other", "pretty_name": long, "license_name": "x-y", "tags": ["a: b", "-c"],
            "configs": [{"config_name": "p", "data_files": [{"split": "test", "path": ["p/test-*.parquet"]}]}],
            "dataset_info": {"config_name": "p", "features": yaml_features(R("pitch-ternary"), 16000)}}  # fmt: skip
    assert card.card_yaml(meta) == _hub_yaml(meta)


@pytest.mark.parametrize("names", [("default",), ("pitch",), ("voice_pitch", "pitch", "all")])
def test_dataset_info_yaml_as_datasets_writes_it(names: tuple[str, ...]) -> None:
    # one config: a mapping (config_name first unless "default"); several: a list sorted by config name
    infos = {n: datasets.DatasetInfo(features=vocalgrad_features(R("pitch-yesno")), download_size=7 + i, dataset_size=5)
             for i, n in enumerate(names)}  # fmt: skip
    ours = {n: {"features": yaml_features(R("pitch-yesno")), "splits": [], "download_size": 7 + i, "dataset_size": 5}
            for i, n in enumerate(names)}  # fmt: skip
    theirs = _old_yaml(infos)
    for entry in [theirs] if isinstance(theirs, dict) else theirs:
        entry.setdefault("splits", [])  # datasets leaves out an empty SplitDict
    assert card._dataset_info_yaml(ours) == theirs


@pytest.mark.parametrize("n", [0, 1, 2, 3, 1000, 48001])
@pytest.mark.parametrize("sr", [8000, 16000, 44100, 48000])
def test_wav_bytes_equal_soundfile(n: int, sr: int) -> None:
    pcm = np.random.default_rng(n).integers(-32768, 32768, n).astype(np.int16)
    buf = io.BytesIO()
    sf.write(buf, pcm, sr, subtype="PCM_16", format="WAV")
    assert wav_bytes(pcm, sr) == buf.getvalue()
    assert wav_bytes(pcm[::2], sr) == wav_bytes(pcm[::2].copy(), sr)  # a strided view: its samples, in order


def test_wav_bytes_other_layouts_still_through_soundfile() -> None:
    stereo = (np.arange(20, dtype=np.int16) * 100).reshape(10, 2)
    buf = io.BytesIO()
    sf.write(buf, stereo, 8000, subtype="PCM_16", format="WAV")
    assert wav_bytes(stereo, 8000) == buf.getvalue()
    audio, sr = sf.read(io.BytesIO(wav_bytes(stereo, 8000)), dtype="int16")
    assert sr == 8000 and audio.shape == (10, 2) and (audio == stereo).all()


def _demo_rows(config: str, audio_format: str = "wav") -> list[dict]:
    src = get_source("demo")
    clip = src.clips("test")[0]
    pcm = src.read(clip)
    return list(iter_config_rows(config_spec(config), clip, pcm.samples, pcm.sample_rate, audio_format=audio_format))


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    names = table.column_names
    pq.write_table(table, sink, compression={c: "none" if c == "audio" else "snappy" for c in names},
                   use_dictionary=[c for c in names if c != "audio"])  # fmt: skip
    return sink.getvalue().to_pybytes()


def _from_pylist(rows: list[dict], fmt: str) -> pa.Table:
    """How shards were made before: datasets' features, its ClassLabel, pa.Table.from_pylist."""
    features = vocalgrad_features(R(fmt))
    encoded = [{**{k: r[k] for k in features}, "label": features["label"].str2int(r["label"])} for r in rows]
    return pa.Table.from_pylist(encoded, schema=features.arrow_schema)


@pytest.mark.parametrize("audio_format", ["pcm16", "wav"])
@pytest.mark.parametrize("chunk", [None, 1_000_000])
def test_rows_table_equals_from_pylist(audio_format: str, chunk: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if chunk:  # WAV bytes over the int32 offset limit go in chunks (here a small limit: a few clips per chunk)
        monkeypatch.setattr(arrowrows, "MAX_CHUNK_BYTES", chunk)
    wav = _demo_rows("volume-ternary")  # 24 conditions and the source row, whose param_start/end are null
    assert wav[-1]["param_start"] is None and len(wav) == 25
    rows = wav if audio_format == "wav" else _demo_rows("volume-ternary", audio_format)
    ours, theirs = rows_table(rows, R("pitch-ternary")), _from_pylist(wav, "pitch-ternary")
    assert ours.equals(theirs, check_metadata=True)
    if chunk:  # a shard over 2 GB: the same rows, in pages cut at the chunks (from_pylist chunks such a list too)
        assert ours.column("audio").num_chunks > 1
        assert pq.read_table(pa.BufferReader(_parquet_bytes(ours))).equals(theirs, check_metadata=True)
    else:
        assert _parquet_bytes(ours) == _parquet_bytes(theirs)


def test_rows_table_refuses_a_value_over_the_offset_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrowrows, "MAX_CHUNK_BYTES", 1000)
    with pytest.raises(ValueError, match="a value of 1044 bytes does not fit an Arrow binary array"):
        rows_table([{**_demo_rows("volume")[0], "audio": {"pcm16": np.zeros(500, np.int16), "sampling_rate": 8000,
                                                           "path": "x.wav"}}])  # fmt: skip


def test_rows_table_claim_columns_with_nulls() -> None:
    rows = _demo_rows("volume")[:6]
    claims = [("increase", True), ("none", None), ("decrease", False)] * 2
    rows = [{**r, "claim": c, "congruent": g, "template_id": f"t{i}", "voice_id": "v\u00e9", "transcript": "ok"}
            for i, (r, (c, g)) in enumerate(zip(rows, claims, strict=True))]  # fmt: skip
    ours, theirs = rows_table(rows, R("pitch-conflict")), _from_pylist(rows, "pitch-conflict")
    assert ours.column("congruent").to_pylist() == [True, None, False] * 2
    assert ours.equals(theirs, check_metadata=True)
    assert _parquet_bytes(ours) == _parquet_bytes(theirs)


def test_rows_table_names_an_unknown_label() -> None:
    rows = _demo_rows("volume")[:1]
    with pytest.raises(ValueError, match="label 'increase' is not one of the recipe's labels"):
        rows_table(rows, R("pitch-yesno"))


def test_build_imports_no_datasets_pandas_or_hub_and_leaves_the_process_as_python_starts_it(tmp_path: Path) -> None:
    """The CLI's build tunes no allocator or page setting (issue 36: none paid for itself); only as the console
    script does it skip the exit's garbage collection (cli.skip_exit_collection); the same shard bytes either way."""
    code = (
        "import ctypes, gc, json, sys\n"
        "import pyarrow as pa\n"
        "thp_off = lambda: ctypes.CDLL(None).prctl(42, 0, 0, 0, 0) if sys.platform.startswith('linux') else 0\n"
        "from vocalgrad_dataset import cli\n"
        "args = ['build', '--config', 'volume', '--split', 'test', '--source', 'demo', '--quiet', '--out']\n"
        "cli.main([*args, sys.argv[1]])\n"  # called with argv (a test, a library user)
        "first = [gc.get_freeze_count(), pa.default_memory_pool().backend_name, thp_off()]\n"
        "sys.argv = ['vocalgrad-dataset', *args, sys.argv[2]]\n"
        "cli.main()\n"  # as the console script calls it
        "mods = sorted({m.split('.')[0] for m in sys.modules} & {'datasets', 'pandas', 'huggingface_hub'})\n"
        "then = [gc.get_freeze_count() > 0, pa.default_memory_pool().backend_name, thp_off()]\n"
        "print(json.dumps([first, then, mods]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a"), str(tmp_path / "b")], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]  # fmt: skip
    default_pool = pa.default_memory_pool().backend_name
    assert json.loads(out) == [[0, default_pool, 0], [True, default_pool, 0], []]
    a, b = (sorted(p.read_bytes() for p in (tmp_path / d).rglob("*.parquet")) for d in "ab")
    assert len(a) == 1 and a == b


def test_skip_exit_collection_freezes_where_it_can_and_else_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from vocalgrad_dataset import cli
    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))  # the real one would freeze this test process
    assert cli.skip_exit_collection() is True and frozen == [True]
    monkeypatch.delattr(gc, "freeze")  # an interpreter without it (not CPython)
    assert cli.skip_exit_collection() is False and frozen == [True]
