"""Parquet build, load_dataset round trip, streaming shards, resume, determinism and bad input end to end."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import datasets
import numpy as np
import pytest
import soundfile as sf
from datasets.distributed import split_dataset_by_node

from tests.helpers.sources import build_vctk_tree, vctk_wav_path
from vocalgrad_dataset.build.export import build
from vocalgrad_dataset.builder import VocalGrad
from vocalgrad_dataset.cli import main as cli
from vocalgrad_dataset.generate import iter_rows

REPO = Path(__file__).resolve().parents[1]
COLUMNS = {
    "audio", "benchmark_clip_id", "category", "attribute", "prompt", "label", "direction", "curve", "tier",
    "parameter", "param_start", "param_end", "param_fixed", "source_item_id", "source_clip_id", "speaker_id",
    "source_text", "onset_sec", "offset_sec", "duration_sec", "clipped_ratio", "generator_version",
}  # fmt: skip


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*.parquet"))}


def test_build_then_load_dataset_round_trip(tmp_path: Path) -> None:
    assert cli(["build", "--config", "pitch", "--split", "test", "--source", "demo", "--out", str(tmp_path), "--quiet"]) == 0
    ds = datasets.load_dataset(str(tmp_path), "pitch", split="test")
    assert set(ds.column_names) == COLUMNS
    assert len(ds) == 24 * 3 and ds.features["label"].names == ["decrease", "increase"]
    assert isinstance(ds.features["audio"], datasets.Audio)
    raw = ds.cast_column("audio", datasets.Audio(decode=False))[0]["audio"]
    audio, sr = sf.read(__import__("io").BytesIO(raw["bytes"]), dtype="int16")
    assert sr == 48000 and audio.ndim == 1
    # the stored audio is exactly what the generator streams
    first = next(iter_rows("pitch", "test", "demo"))
    np.testing.assert_array_equal(audio.astype(np.float32) / 32768, first["audio"]["array"])
    assert "config_name: pitch" in (tmp_path / "README.md").read_text()
    check_card(tmp_path, raw_rate=sr)


def check_card(folder: Path, raw_rate: int) -> None:
    """The card of a demo `pitch` build: dataset_info, long config names, citation, licences, package version."""
    from importlib.metadata import version

    import yaml

    info = datasets.load_dataset_builder(str(folder), "pitch").info
    assert info.features is not None and info.features["audio"].sampling_rate == raw_rate
    assert info.features["label"].names == ["decrease", "increase"]
    assert info.splits["test"].num_examples == 72
    ds = datasets.load_dataset(str(folder), "voice_pitch", split="test")  # the published long name
    assert len(ds) == 72 and ds[0]["benchmark_clip_id"] == next(iter_rows("pitch", "test", "demo"))["benchmark_clip_id"]
    text = (folder / "README.md").read_text()
    meta = yaml.safe_load(text.split("---\n")[1])
    entry = next(e for e in meta["dataset_info"] if e["config_name"] == "pitch")
    assert entry["splits"] == [{"name": "test", "num_bytes": entry["splits"][0]["num_bytes"], "num_examples": 72}]
    assert entry["features"][0] == {"name": "audio", "dtype": {"audio": {"sampling_rate": raw_rate}}}
    assert {c["config_name"] for c in meta["configs"]} >= {"pitch", "voice_pitch"}
    assert "@misc{ryu2026vocalgrad," in text and "```bibtex" in text
    assert f"Built by `vocalgrad-dataset` {version('vocalgrad')} (generator" in text
    assert "`COPYING.cmu_arctic`" in text and "- `vctk`: VCTK 0.80" in text  # this source's terms, then the rest
    assert meta["license"] == "other"  # the demo clips are not CC-BY-4.0
    assert meta["license_name"] == "vocalgrad-demo-sources"  # the Hub wants `other` named (issue 23)
    assert 'load_dataset(<this folder or repo>, "pitch", split="test")' in text and "`all`" not in text


def test_card_all_holds_the_nine_categories_only(tmp_path: Path) -> None:
    build("volume", ["test"], tmp_path, source="demo", progress=False)
    build("volume-ternary", ["test"], tmp_path, source="demo", progress=False)
    build("echo", ["test"], tmp_path, source="demo", progress=False)
    ds = datasets.load_dataset(str(tmp_path), "all", split="test")  # one schema: the ternary config stays out
    assert len(ds) == 2 * 72 and sorted(set(ds["category"])) == ["echo", "volume"]
    ternary = datasets.load_dataset_builder(str(tmp_path), "volume-ternary").info
    assert ternary.features["label"].names == ["decrease", "increase", "constant"]
    assert ternary.splits["test"].num_examples == 75
    assert datasets.load_dataset_builder(str(tmp_path), "all").info.splits["test"].num_examples == 2 * 72


def test_streaming_builder_shards_by_source_clip() -> None:
    import vocalgrad_dataset

    assert vocalgrad_dataset.VocalGrad is VocalGrad  # the documented import
    stream = VocalGrad(config_name="voice_pitch", source="demo").as_streaming_dataset(split="test")
    assert stream.num_shards == 3
    ranks = [
        [r["benchmark_clip_id"] for r in split_dataset_by_node(stream, rank=k, world_size=3)]
        for k in range(3)
    ]
    assert all(len(r) == 24 for r in ranks)
    assert len({i.split("__")[1] for i in ranks[0]}) == 1  # each rank generates one source clip's rows only
    assert sorted(sum(ranks, [])) == sorted(r["benchmark_clip_id"] for r in iter_rows("pitch", "test", "demo"))


def test_vctk_tree_end_to_end(tmp_path: Path) -> None:
    root = tmp_path / "VCTK-Corpus"
    pairs = build_vctk_tree(root, n_clips=2, split="test")
    ds = VocalGrad(config_name="volume", source="vctk", data_dir=str(root)).as_streaming_dataset(split="test")
    # the fixture tree holds only 2 of the 100 frozen clips: generate those through the real loader
    rows = list(iter_rows("volume", "test", "vctk", str(root), clips=[c for c in __import__("vocalgrad_dataset").generate.source_clips("test", "vctk", str(root))[:2]]))
    assert [r["benchmark_clip_id"].split("__")[:2] for r in rows[::24]] == [list(p) for p in pairs]
    assert rows[0]["onset_sec"] == pytest.approx(1.66)  # the frozen onset of p226_106, not a detected one
    assert ds.num_shards == 100


def test_num_proc_and_process_determinism(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    build("roughness", ["test"], one, source="demo", clips_per_shard=1, progress=False)
    build("roughness", ["test"], two, source="demo", clips_per_shard=1, num_proc=2, progress=False)
    assert digests(one) == digests(two) and len(digests(one)) == 3


def test_resume_after_kill_matches_clean_build(tmp_path: Path) -> None:
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    build("volume", ["test"], clean, source="demo", clips_per_shard=1, progress=False)
    cmd = [sys.executable, "-m", "vocalgrad_dataset.cli", "build", "--config", "all", "--split", "test",
           "--source", "demo", "--out", str(killed), "--clips-per-shard", "1", "--quiet"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(killed.rglob("*.parquet"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(list(killed.rglob("*.parquet")))
    assert 3 <= done_before < 27
    assert not [p for p in killed.rglob("*.parquet") if p.stat().st_size == 0]
    report = build("all", ["test"], killed, source="demo", clips_per_shard=1, progress=False)
    assert report["written_shards"] == 27 - done_before
    assert {k: v for k, v in digests(killed).items() if k.startswith("volume/")} == {f"volume/{k}": v for k, v in ((k.split("/", 1)[1], v) for k, v in digests(clean).items())}
    assert len(digests(killed)) == 27
    assert build("all", ["test"], killed, source="demo", clips_per_shard=1, progress=False)["written_shards"] == 0
    ds = datasets.load_dataset(str(killed), "all", split="test")
    assert len(ds) == 9 * 3 * 24 and len(set(ds["benchmark_clip_id"])) == 3 * 24


def test_corrupt_file_fails_build_naming_clip_without_partial_shard(tmp_path: Path, capsys) -> None:
    root = tmp_path / "VCTK-Corpus"
    build_vctk_tree(root, n_clips=4, split="test")
    vctk_wav_path(root, "p226_161").write_bytes(os.urandom(2000))
    out = tmp_path / "out"
    code = cli(["build", "--config", "echo", "--split", "test", "--source", "vctk", "--data-dir", str(root),
                "--out", str(out), "--quiet", "--clips-per-shard", "1"])  # fmt: skip
    assert code == 2
    assert "p226_161" in capsys.readouterr().err
    assert not list(out.rglob("*.tmp")) and not [p for p in out.rglob("*.parquet") if "00001" in p.name]


def test_cli_missing_corpus_dir_and_16k_file(tmp_path: Path, capsys) -> None:
    assert cli(["build", "--config", "pitch", "--source", "vctk", "--data-dir", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert str(tmp_path / "nope") in capsys.readouterr().err
    root = tmp_path / "VCTK-Corpus"
    build_vctk_tree(root, n_clips=1, split="test")
    wav = vctk_wav_path(root, "p226_106")
    x, _ = sf.read(wav, dtype="int16")
    sf.write(wav, x[::3], 16000, subtype="PCM_16")
    with pytest.raises(Exception, match=r"p226_106.*16000|16000.*p226_106"):
        next(iter_rows("pitch", "test", "vctk", str(root)))


def test_ids_and_list_commands(capsys) -> None:
    assert cli(["ids", "--config", "pitch", "--split", "test"]) == 0
    ids = capsys.readouterr().out.splitlines()
    assert len(ids) == 2400 and ids[0] == "p226_01__p226_106__linear__low__up"
    assert cli(["ids", "--config", "pitch", "--split", "test", "--source", "demo"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 72
    assert cli(["list", "--markdown"]) == 0
    table = capsys.readouterr().out.strip()
    # the docs' table is generated from the registry, not hand-copied
    assert table in (REPO / "docs" / "reference" / "categories.md").read_text()


def test_card_load_example_names_what_the_build_holds(tmp_path: Path) -> None:
    """Issue 23: a volume-only build's card named "pitch" and `all`; it names its own config and split."""
    from vocalgrad_dataset.build.card import load_line

    (tmp_path / "volume").mkdir()
    (tmp_path / "volume" / "train-00000-of-00001.parquet").write_bytes(b"")
    line = load_line(tmp_path)
    assert '"volume", split="train"' in line and "pitch" not in line and "`all`" not in line
    (tmp_path / "noise").mkdir()
    (tmp_path / "noise" / "test-00000-of-00001.parquet").write_bytes(b"")
    assert "`all` is the categories of this build together" in load_line(tmp_path)
