"""Bad input and faults on the dataset side (issue 12): every case is reproduced for real.

Reading sources (float / 8- / 24- / 32-bit PCM), out-of-range CLI numbers, mismatched rebuilds, kill -9
mid-write, concurrent builds, unreadable metadata, unsafe paths, file modes under a umask, progress lines
in a log. The reference conversions here are written out with numpy and the stdlib `wave` module.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
import wave
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from tests.helpers.folder_source import SR, fbuild, read_csv, speechlike, tiny_folder, write_csv
from tests.helpers.user_errors import without_root_override
from vocalgrad_dataset.build.export import PUSH_IGNORE, BuildError, build, push_to_hub
from vocalgrad_dataset.build.info import RECORD_NAME, BuildMismatchError
from vocalgrad_dataset.cli import argtypes
from vocalgrad_dataset.cli import main as cli
from vocalgrad_dataset.fileio import LOCK_NAME, LockedError, atomic_path, atomic_write_text
from vocalgrad_dataset.progress import LineProgress, progress
from vocalgrad_dataset.sources import SourceError, get_source, read_pcm, write_wav_pcm16

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def rows_of(out: Path, config: str = "volume") -> list[dict]:
    """Every row of a config's shards (what load_dataset would return), ids and audio bytes."""
    rows = []
    for f in sorted((out / config).glob("*.parquet")):
        rows += pq.read_table(f, columns=["benchmark_clip_id", "audio"]).to_pylist()
    return rows


def one_error_line(err: str) -> str:
    """The single line a bad input must produce (no traceback)."""
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


# --- item 1: reading sources ------------------------------------------------------------------------------


def write_wave(path: Path, frames: bytes, width: int, channels: int = 1) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(SR)
        w.writeframes(frames)


def test_pcm_8_16_24_32_bit_land_on_the_int16_grid(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    v16 = rng.integers(-32768, 32768, 2000).astype("<i2")
    write_wave(tmp_path / "p16.wav", v16.tobytes(), 2)
    pcm = read_pcm(tmp_path / "p16.wav", clip_name="p16")
    assert pcm.samples.dtype == np.int16 and np.array_equal(pcm.samples, v16) and pcm.source_format == "PCM_16"

    u8 = rng.integers(0, 256, 2000).astype(np.uint8)  # WAV 8-bit is unsigned, 128 = silence
    write_wave(tmp_path / "p8.wav", u8.tobytes(), 1)
    pcm = read_pcm(tmp_path / "p8.wav", clip_name="p8")
    assert np.array_equal(pcm.samples, (u8.astype(np.int32) - 128) * 256) and pcm.source_format == "PCM_U8"

    v24 = np.concatenate([rng.integers(-(2**23), 2**23, 2000), [2**23 - 1, -(2**23), 128, 384, -128]])
    raw = b"".join(int(v).to_bytes(3, "little", signed=True) for v in v24)
    write_wave(tmp_path / "p24.wav", raw, 3)
    pcm = read_pcm(tmp_path / "p24.wav", clip_name="p24")
    expect = np.clip(np.round(v24 / 256.0), -32768, 32767)  # np.round: half to even, like the reader's rint
    assert np.array_equal(pcm.samples, expect) and pcm.source_format == "PCM_24"
    assert list(pcm.samples[-5:]) == [32767, -32768, 0, 2, 0]  # 128/256 and 384/256 round half to even

    v32 = rng.integers(-(2**31), 2**31, 2000, dtype=np.int64).astype("<i4")
    write_wave(tmp_path / "p32.wav", v32.tobytes(), 4)
    pcm = read_pcm(tmp_path / "p32.wav", clip_name="p32")
    assert np.array_equal(pcm.samples, np.clip(np.round(v32 / 65536.0), -32768, 32767))
    assert pcm.source_format == "PCM_32"


@pytest.mark.parametrize("subtype", ["FLOAT", "DOUBLE"])
def test_float_wav_is_scaled_not_truncated(tmp_path: Path, subtype: str) -> None:
    x = np.linspace(-0.99, 0.99, 3001)
    sf.write(str(tmp_path / "f.wav"), x, SR, subtype=subtype)
    pcm = read_pcm(tmp_path / "f.wav", clip_name="f")
    stored = sf.read(str(tmp_path / "f.wav"), dtype="float64")[0]  # FLOAT stores float32
    assert np.array_equal(pcm.samples, np.round(stored * 32768))
    assert pcm.source_format == subtype and int(np.abs(pcm.samples).max()) > 32000  # not -1/0/1


def test_float_wav_nan_and_overrange(tmp_path: Path) -> None:
    x = np.zeros(100)
    x[50] = np.nan
    sf.write(str(tmp_path / "nan.wav"), x, SR, subtype="FLOAT")
    with pytest.raises(SourceError, match=r"clip nan: .*nan\.wav \(FLOAT\) holds NaN"):
        read_pcm(tmp_path / "nan.wav", clip_name="nan")
    sf.write(str(tmp_path / "loud.wav"), np.array([0.5, 2.0, -3.0]), SR, subtype="FLOAT")
    with pytest.warns(UserWarning, match="peaks at 3 > 1.0"):
        pcm = read_pcm(tmp_path / "loud.wav", clip_name="loud")
    assert list(pcm.samples) == [16384, 32767, -32768]


def test_float_source_builds_the_same_audio_as_pcm16_and_the_card_says_so(tmp_path: Path) -> None:
    a, b = tiny_folder(tmp_path / "pcm16"), tiny_folder(tmp_path / "float", "FLOAT")
    fbuild(a, tmp_path / "outa")
    report = fbuild(b, tmp_path / "outb")
    ra, rb = rows_of(tmp_path / "outa"), rows_of(tmp_path / "outb")
    assert len(ra) == 48 and [r["benchmark_clip_id"] for r in ra] == [r["benchmark_clip_id"] for r in rb]
    assert all(x["audio"]["bytes"] == y["audio"]["bytes"] for x, y in zip(ra, rb, strict=True))
    assert report["non_pcm16_source_clips"] == 2
    rec = json.loads((tmp_path / "outb" / "volume" / RECORD_NAME).read_text())
    assert rec["source_formats"] == {"utt0": "FLOAT", "utt1": "FLOAT"}
    card = (tmp_path / "outb" / "README.md").read_text()
    assert "Source audio not 16-bit PCM" in card and "FLOAT: 2 (utt0, utt1)" in card
    assert "not 16-bit" not in (tmp_path / "outa" / "README.md").read_text()
    assert json.loads((tmp_path / "outa" / "volume" / RECORD_NAME).read_text())["source_formats"] == {}


def test_a_shard_over_the_row_group_limit_is_written_in_row_groups_with_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vocalgrad_dataset.build import export
    from vocalgrad_dataset.build import info as buildinfo
    src = tiny_folder(tmp_path / "float", "FLOAT")
    fbuild(src, tmp_path / "whole")
    held: list[int] = []
    real = export.rows_table

    def spy(rows, fmt="direction"):  # noqa: ANN001, ANN202 - rows_table's own signature
        held.append(sum(r["audio"]["pcm16"].nbytes for r in rows))
        return real(rows, fmt)

    row_bytes = 2 * SR  # a one-second clip's PCM16 per condition
    monkeypatch.setattr(export, "rows_table", spy)
    monkeypatch.setattr(export, "SHARD_ROW_GROUP_BYTES", 5 * row_bytes)
    fbuild(src, tmp_path / "groups")
    (whole,), (grouped,) = (sorted((tmp_path / d / "volume").glob("*.parquet")) for d in ("whole", "groups"))
    # 2 clips x 24 conditions in one shard: a row group per 5 rows held, the last 3 rows at the end
    assert held == [5 * row_bytes] * 9 + [3 * row_bytes]
    assert pq.ParquetFile(whole).metadata.num_row_groups == 1
    assert pq.ParquetFile(grouped).metadata.num_row_groups == 10
    assert pq.read_table(grouped).to_pylist() == pq.read_table(whole).to_pylist()
    # the non-PCM16 source formats, known only after the last clip, are still in the file's metadata
    assert buildinfo.shard_source_formats(grouped) == buildinfo.shard_source_formats(whole) == {"utt0": "FLOAT", "utt1": "FLOAT"}
    rec = json.loads((tmp_path / "groups" / "volume" / RECORD_NAME).read_text())
    assert rec["source_formats"] == {"utt0": "FLOAT", "utt1": "FLOAT"}


# --- item 2: numbers at the command line ------------------------------------------------------------------


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--clips-per-shard", "-1", "-1 is not a positive integer"),
    ("--clips-per-shard", "0", "0 is not a positive integer"),
    ("--clips-per-shard", "two", "'two' is not a positive integer"),
    ("--num-proc", "0", "0 is not a positive integer"),
    ("--num-proc", "-3", "-3 is not a positive integer"),
    ("--num-proc", "1.5", "'1.5' is not a positive integer"),
    ("--lock-timeout", "-1", "-1 is not a non-negative number"),
    ("--lock-timeout", "nan", "'nan' is not a non-negative number"),
])  # fmt: skip
def test_out_of_range_numbers_are_refused_by_argparse(tmp_path: Path, capsys, flag: str, value: str, says: str) -> None:
    with pytest.raises(SystemExit) as exc:
        cli(["build", "--config", "volume", "--source", "demo", "--out", str(tmp_path / "o"), flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"error: argument {flag}: {says}" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_argtypes_accept_and_refuse() -> None:
    import argparse

    assert argtypes.positive_int(" 7") == 7 and argtypes.nonnegative_int("0") == 0
    assert argtypes.fraction("0.25") == 0.25 and argtypes.positive_float("1e-4") == 1e-4
    assert argtypes.int_range(1, 3)("3") == 3
    for fn, bad in [(argtypes.positive_int, "0"), (argtypes.nonnegative_int, "-1"), (argtypes.fraction, "0"),
                    (argtypes.fraction, "1.5"), (argtypes.positive_float, "inf"), (argtypes.int_range(1, 3), "4"),
                    (argtypes.nonnegative_float, "-0.1")]:  # fmt: skip
        with pytest.raises(argparse.ArgumentTypeError):
            fn(bad)


def _eval_parser():
    import argparse

    from harness.runner import add_eval_arguments

    p = argparse.ArgumentParser(prog="harness eval")
    add_eval_arguments(p)
    return p


def _extract_parser():
    from probing.extract import build_parser

    return build_parser()


def _probe_parser():
    from probing.train import build_parser

    return build_parser()


@pytest.mark.parametrize(("parser", "args", "says"), [
    (_eval_parser, ["--model", "m", "--out", "o", "--max-new-tokens", "0"], "argument --max-new-tokens: 0 is not a positive"),
    (_eval_parser, ["--model", "m", "--out", "o", "--data-workers", "-1"], "argument --data-workers: -1 is not a non-negative"),
    (_eval_parser, ["--model", "m", "--out", "o", "--seed", "-5"], "argument --seed: -5 is not a non-negative"),
    (_extract_parser, ["--model", "m", "--split", "test", "--out", "o", "--units-per-shard", "0"],
     "argument --units-per-shard: 0 is not a positive"),
    (_extract_parser, ["--model", "m", "--split", "test", "--out", "o", "--limit-units", "-2"],
     "argument --limit-units: -2 is not a positive"),
    (_probe_parser, ["d", "--epochs", "0"], "argument --epochs: 0 is not a positive"),
    (_probe_parser, ["d", "--batch-size", "-512"], "argument --batch-size: -512 is not a positive"),
])  # fmt: skip
def test_harness_and_probing_numbers_use_the_shared_validators(capsys, parser, args: list[str], says: str) -> None:
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(args)
    assert exc.value.code == 2 and says in capsys.readouterr().err


def test_api_refuses_bad_numbers_before_writing(tmp_path: Path) -> None:
    data = tiny_folder(tmp_path / "d")
    with pytest.raises(BuildError, match="clips_per_shard must be >= 1, got 0"):
        fbuild(data, tmp_path / "o", clips_per_shard=0)
    with pytest.raises(BuildError, match="num_proc must be >= 1, got -3"):
        fbuild(data, tmp_path / "o", num_proc=-3)
    assert not (tmp_path / "o").exists()


# --- item 3: build settings record, mismatched rebuilds, --overwrite --------------------------------------


def test_record_written_and_same_settings_resume(tmp_path: Path) -> None:
    data, out = tiny_folder(tmp_path / "d"), tmp_path / "o"
    assert fbuild(data, out, clips_per_shard=1)["written_shards"] == 2
    rec = json.loads((out / "volume" / RECORD_NAME).read_text())
    assert rec["source"] == "folder" and rec["clips_per_shard"] == 1 and rec["config"] == "volume"
    assert rec["complete"] is True and rec["generator_version"]
    assert rec["splits"]["test"]["clips"] == 2 and rec["splits"]["test"]["shards"] == 2
    assert fbuild(data, out, clips_per_shard=1)["written_shards"] == 0
    assert "## Build settings" in (out / "README.md").read_text()
    assert "`volume`: source `folder`" in (out / "README.md").read_text()


@pytest.mark.parametrize("change", ["clips_per_shard", "source", "clip_list"])
def test_mismatched_rebuild_is_refused_then_overwrite_replaces(tmp_path: Path, capsys, change: str) -> None:
    data, out = tiny_folder(tmp_path / "d", n=3), tmp_path / "o"
    fbuild(data, out, clips_per_shard=1)
    before = {p.name: p.read_bytes() for p in (out / "volume").iterdir()}
    args = ["build", "--config", "volume", "--source", "folder", "--data-dir", str(data), "--out", str(out), "--quiet",
            "--clips-per-shard", "1"]  # fmt: skip
    if change == "clips_per_shard":
        args[-1] = "2"
        says = "clips_per_shard 1 -> 2"
    elif change == "source":
        args[4:7] = ["demo"]
        says = "source 'folder' -> 'demo'"
    else:
        rows = read_csv(data)
        rows[0]["onset_sec"] = "0.2"
        write_csv(data, rows)
        says = "test clip list (3 clips -> 3 clips"
    assert cli(args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert says in line and "--overwrite" in line and str(out / "volume") in line
    assert {p.name: p.read_bytes() for p in (out / "volume").iterdir()} == before  # untouched
    assert cli([*args, "--overwrite"]) == 0
    ids = [r["benchmark_clip_id"] for r in rows_of(out)]
    assert len(ids) == len(set(ids)) == 3 * 24  # the folder's 3 clips, or demo's 3: never both builds


def test_legacy_or_foreign_parquet_without_record_is_refused(tmp_path: Path) -> None:
    data, out = tiny_folder(tmp_path / "d"), tmp_path / "o"
    fbuild(data, out, clips_per_shard=1)
    (out / "volume" / RECORD_NAME).unlink()
    with pytest.raises(BuildMismatchError, match="holds 2 Parquet file.* but no build_settings.json"):
        fbuild(data, out, clips_per_shard=1)
    fbuild(data, out, clips_per_shard=1, overwrite=True)
    stray = out / "volume" / "test-00000-of-00009.parquet"
    stray.write_bytes((out / "volume" / "test-00000-of-00002.parquet").read_bytes())
    with pytest.raises(BuildMismatchError, match="does not account for .*test-00000-of-00009"):
        fbuild(data, out, clips_per_shard=1)
    keep = out / "volume" / "notes.txt"
    keep.write_text("mine")
    fbuild(data, out, clips_per_shard=1, overwrite=True)
    assert sorted(p.name for p in (out / "volume").glob("*.parquet")) == ["test-00000-of-00002.parquet", "test-00001-of-00002.parquet"]
    assert keep.read_text() == "mine"  # --overwrite deletes only the config's own shards and record


def test_new_split_is_added_to_the_record(tmp_path: Path) -> None:
    data, out = tiny_folder(tmp_path / "d", n=4), tmp_path / "o"
    rows = read_csv(data)
    for i, r in enumerate(rows):
        r["split"] = "test" if i < 2 else "train"
    write_csv(data, rows)
    fbuild(data, out)
    build("volume", ["train"], out, source="folder", data_dir=str(data), progress=False)
    rec = json.loads((out / "volume" / RECORD_NAME).read_text())
    assert sorted(rec["splits"]) == ["test", "train"] and rec["complete"]


# --- faults: kill -9 mid-write, .tmp cleanup, push, lock --------------------------------------------------

KILL_MID_WRITE = """
import os, signal, sys
from vocalgrad_dataset.build import export
calls = []
real = export._write_table_file
def torn(table, path):
    calls.append(path)
    real(table, path)
    if len(calls) == 2:  # the second shard: half a file under its temporary name, then kill -9
        os.truncate(path, os.path.getsize(path) // 2)
        os.kill(os.getpid(), signal.SIGKILL)
export._write_table_file = torn
export.build("volume", ["test"], sys.argv[1], source="folder", data_dir=sys.argv[2], clips_per_shard=1, progress=False)
"""


def test_kill_mid_write_leaves_tmp_that_the_next_run_removes(tmp_path: Path) -> None:
    data = tiny_folder(tmp_path / "d", n=3)
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    fbuild(data, clean, clips_per_shard=1)
    proc = subprocess.run([sys.executable, "-c", KILL_MID_WRITE, str(killed), str(data)], env=ENV, cwd=REPO)
    assert proc.returncode == -signal.SIGKILL
    tmps = list((killed / "volume").glob(".*.tmp"))
    assert len(tmps) == 1 and len(list((killed / "volume").glob("*.parquet"))) == 1
    assert json.loads((killed / "volume" / RECORD_NAME).read_text())["complete"] is False
    report = fbuild(data, killed, clips_per_shard=1)
    assert report["removed_tmp_files"] == 1 and report["written_shards"] == 2
    assert not list(killed.rglob("*.tmp"))
    assert rows_of(killed) == rows_of(clean)  # nothing lost, nothing duplicated, same audio


def test_push_uploads_only_final_files(tmp_path: Path, monkeypatch) -> None:
    from huggingface_hub.utils import filter_repo_objects

    data, out = tiny_folder(tmp_path / "d"), tmp_path / "o"
    fbuild(data, out, clips_per_shard=1)
    (out / "volume" / ".test-00002-of-00002.parquet.dead.tmp").write_bytes(b"torn")  # a killed writer's file
    uploaded: list[str] = []

    class FakeApi:
        def create_repo(self, *a, **k) -> None:
            pass

        def upload_folder(self, *, folder_path: str, ignore_patterns: list[str], **k) -> str:
            files = sorted(str(p.relative_to(folder_path)) for p in Path(folder_path).rglob("*") if p.is_file())
            uploaded.extend(filter_repo_objects(files, ignore_patterns=ignore_patterns))
            return "https://hub/commit/1"

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    (out / "volume" / ".test-00003-of-00009.parquet.live.tmp").write_bytes(b"x")
    assert push_to_hub(out, "me/vocalgrad") == "https://hub/commit/1"
    assert uploaded == ["README.md", f"volume/{RECORD_NAME}", "volume/test-00000-of-00002.parquet",
                        "volume/test-00001-of-00002.parquet"]  # fmt: skip
    assert LOCK_NAME not in uploaded and "*.tmp" in PUSH_IGNORE


def test_push_without_network_is_one_line_and_keeps_the_token_out(tmp_path: Path, capsys, monkeypatch) -> None:
    from huggingface_hub import constants

    data, out = tiny_folder(tmp_path / "d"), tmp_path / "o"
    fbuild(data, out)
    # no network, for real: online mode, a Hub endpoint where nothing listens (connection refused)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_TOKEN", "hf_SECRETtoken0123456789")
    args = ["build", "--config", "volume", "--source", "folder", "--data-dir", str(data), "--out", str(out), "--quiet",
            "--push-to-hub", "me/vg"]  # fmt: skip
    assert cli(args) == 2
    captured = capsys.readouterr()
    line = one_error_line(captured.err)
    assert line.startswith(f"vocalgrad-dataset: error: could not push {out} to the Hub dataset 'me/vg': ")
    assert "Connection refused" in line
    assert "the local build is complete" in line and "hf_SECRET" not in captured.err + captured.out


HOLD_LOCK = """
import sys, time
from vocalgrad_dataset.fileio import dir_lock
with dir_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def hold_lock(folder: Path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(folder), str(seconds)], env=ENV, cwd=REPO,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_lock_refuses_waits_and_survives_kill_9(tmp_path: Path, capsys) -> None:
    data, out = tiny_folder(tmp_path / "d"), tmp_path / "o"
    holder = hold_lock(out, 60)
    try:
        with pytest.raises(LockedError, match=rf"{out} is in use by another process \(pid {holder.pid}\)"):
            fbuild(data, out, lock_timeout=0)
        assert not (out / "volume").exists()  # refused before writing anything
        t0 = time.monotonic()
        with pytest.raises(LockedError):
            fbuild(data, out, lock_timeout=0.6)
        assert time.monotonic() - t0 >= 0.6
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (out / LOCK_NAME).exists()  # the stale lock file of a killed holder ...
    assert fbuild(data, out, lock_timeout=0)["written_shards"] == 1  # ... blocks nobody
    capsys.readouterr()
    holder = hold_lock(out, 3.0)
    assert fbuild(data, out, overwrite=True)["written_shards"] == 1  # waits for the holder, then runs
    assert f"waiting for {out}: another process (pid {holder.pid})" in capsys.readouterr().err
    holder.wait()


def test_two_concurrent_builds_write_each_row_once(tmp_path: Path) -> None:
    data, out = tiny_folder(tmp_path / "d", n=3), tmp_path / "o"
    cmd = [sys.executable, "-m", "vocalgrad_dataset.cli", "build", "--config", "volume", "--source", "folder",
           "--data-dir", str(data), "--out", str(out), "--clips-per-shard", "1", "--quiet"]  # fmt: skip
    procs = [subprocess.Popen(cmd, env=ENV, cwd=REPO, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    reports = [json.loads(p.communicate(timeout=180)[0].strip().splitlines()[-1]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(r["written_shards"] for r in reports) == [0, 3]
    ids = [r["benchmark_clip_id"] for r in rows_of(out)]
    assert len(ids) == len(set(ids)) == 72


# --- clear messages -----------------------------------------------------------------------------------------


def cli_error(capsys, data: Path, out: Path, *extra: str) -> str:
    code = cli(["build", "--config", "volume", "--source", "folder", "--data-dir", str(data), "--out", str(out),
                "--quiet", *extra])  # fmt: skip
    assert code == 2
    return one_error_line(capsys.readouterr().err)


def test_undecodable_audio_names_clip_and_file(tmp_path: Path, capsys) -> None:
    data = tiny_folder(tmp_path / "d")
    (data / "utt1.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunkjunkjunk" + os.urandom(500))
    line = cli_error(capsys, data, tmp_path / "o")
    assert "clip utt1: cannot decode audio file" in line and str(data / "utt1.wav") in line
    assert not list((tmp_path / "o").rglob("*.tmp"))


@pytest.mark.parametrize(("content", "says"), [
    (b"file_name,speaker_id\nutt0.wav,s0\nutt1.wav,caf\xe9\n", "metadata.csv line 3 is not UTF-8 (byte 0xe9)"),
    (b"", "metadata.csv is empty"),
    (b"\n\n", "metadata.csv is empty"),
    (b"file_name,speaker_id\n", "metadata.csv lists no files (only a header)"),
    (b"name,speaker\nutt0.wav,s0\n", "has no 'file_name' column (columns: ['name', 'speaker'])"),
    (b"file_name,onset_sec,offset_sec\nutt0.wav,nan,0.9\n", "line 2: onset_sec 'nan' must be a finite number"),
    (b"file_name,onset_sec,offset_sec\nutt0.wav,0.1,inf\n", "line 2: offset_sec 'inf' must be a finite number"),
    (b"file_name,onset_sec,offset_sec\nutt0.wav,-1,0.9\n", "line 2: onset_sec '-1' must be a finite number"),
    (b"file_name,onset_sec,offset_sec\nutt0.wav,0.9,0.1\n", "line 2: onset_sec 0.9 must be before offset_sec 0.1"),
    (b"file_name,onset_sec,offset_sec\nutt0.wav,0.1,\n", "line 2: give both onset_sec and offset_sec or neither"),
    (b"file_name,onset_sec,offset_sec\nutt0.wav,0.1,x\n", "line 2: offset_sec 'x' is not a number"),
])  # fmt: skip
def test_bad_metadata_csv_is_one_line(tmp_path: Path, capsys, content: bytes, says: str) -> None:
    data = tiny_folder(tmp_path / "d")
    (data / "metadata.csv").write_bytes(content)
    line = cli_error(capsys, data, tmp_path / "o")
    assert says in line and str(data / "metadata.csv") in line


def test_output_path_that_is_a_file_is_refused_before_rendering(tmp_path: Path, capsys) -> None:
    data = tiny_folder(tmp_path / "d")
    (data / "utt1.wav").write_bytes(b"garbage")  # rendering would fail on this: the --out check must come first
    out = tmp_path / "out.txt"
    out.write_text("a file")
    assert cli_error(capsys, data, out) == f"vocalgrad-dataset: error: output path {out} is a file; --out must be a folder"
    line = cli_error(capsys, data, out / "sub")
    assert line.endswith(f"output path {out / 'sub'} lies under {out}, which is a file; --out must be a folder")
    assert out.read_text() == "a file"


def test_read_only_output_is_refused_before_rendering(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    prefix = without_root_override()
    try:
        proc = subprocess.run([*prefix, sys.executable, "-m", "vocalgrad_dataset.cli", "build", "--config", "volume",
                               "--source", "demo", "--out", str(ro / "out"), "--quiet"], env=ENV, cwd=REPO,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    finally:
        ro.chmod(0o755)
    assert proc.returncode == 2
    line = one_error_line(proc.stderr)
    assert line == f"vocalgrad-dataset: error: output folder {ro / 'out'} is not writable: Permission denied"
    assert list(ro.iterdir()) == []


def test_list_into_a_closed_pipe_prints_no_traceback() -> None:
    r, w = os.pipe()
    os.close(r)  # the reader (`head`) is gone before anything is written
    proc = subprocess.run([sys.executable, "-m", "vocalgrad_dataset.cli", "list"], env=ENV, cwd=REPO, stdout=w,
                          stderr=subprocess.PIPE, text=True, timeout=120)  # fmt: skip
    os.close(w)
    assert proc.stderr == "" and proc.returncode == 141


def test_ids_piped_to_head_reads_the_first_line() -> None:
    ids = subprocess.Popen([sys.executable, "-m", "vocalgrad_dataset.cli", "ids", "--config", "pitch"], env=ENV,
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    head = subprocess.Popen(["head", "-n", "1"], stdin=ids.stdout, stdout=subprocess.PIPE, text=True)
    assert ids.stdout is not None and ids.stderr is not None
    ids.stdout.close()  # only head holds the read end now, as in a shell pipeline
    first = head.communicate(timeout=120)[0]
    err = ids.stderr.read().decode()
    ids.wait(timeout=120)
    assert first.count("\n") == 1 and first.startswith("p226_01__p226_106__")
    assert err == "" and ids.returncode in (0, 141)  # 2,400 lines outgrow the pipe: usually 141, never a traceback


# --- files and paths ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_outputs_follow_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    from harness.results import atomic_write_text as results_write
    from harness.results import write_jsonl

    data = tiny_folder(tmp_path / "d")
    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        results_write(tmp_path / "r.json", "{}")
        write_jsonl(tmp_path / "s.jsonl", [{"a": 1}])
        write_wav_pcm16(tmp_path / "w.wav", speechlike(100), SR)
        fbuild(data, tmp_path / "o")
    finally:
        os.umask(old)
    files = [tmp_path / n for n in ("a.txt", "r.json", "s.jsonl", "w.wav")]
    files += [tmp_path / "o" / "README.md", *(tmp_path / "o" / "volume").iterdir()]
    assert len(files) == 7
    assert {f.name: oct(f.stat().st_mode & 0o777) for f in files} == {f.name: oct(mode) for f in files}


def test_atomic_path_failure_keeps_old_file_and_leaves_no_tmp(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer died")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]
    with atomic_path(target) as tmp:
        tmp.unlink()  # a writer that recreates its output (mode 0600) still ends with the umask mode
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"new")
        os.close(fd)
    mask = os.umask(0)
    os.umask(mask)
    assert target.read_text() == "new" and target.stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.parametrize(("file_name", "says"), [
    ("../outside.wav", "file name '../outside.wav' points outside"),
    ("sub/../../outside.wav", "file name 'sub/../../outside.wav' points outside"),
    ("ABS", "absolute file name"),
])  # fmt: skip
def test_folder_refuses_paths_outside_unless_allowed(tmp_path: Path, capsys, file_name: str, says: str) -> None:
    data = tiny_folder(tmp_path / "d")
    sf.write(str(tmp_path / "outside.wav"), speechlike(seed=5), SR, subtype="PCM_16")
    (data / "sub").mkdir()
    name = str(tmp_path / "outside.wav") if file_name == "ABS" else file_name
    says = says if file_name != "ABS" else f"absolute file name {name!r}"
    write_csv(data, [{"file_name": "utt0.wav", "onset_sec": "0.1", "offset_sec": "0.9"},
                     {"file_name": name, "onset_sec": "0.1", "offset_sec": "0.9"}])  # fmt: skip
    line = cli_error(capsys, data, tmp_path / "o")
    assert says in line and "metadata.csv line 3" in line and "--allow-outside-paths" in line
    src = get_source("folder", data, allow_outside_paths=True)
    assert sorted(c.source_clip_id for c in src.clips("test")) == ["outside", "utt0"]
    assert cli(["build", "--config", "volume", "--source", "folder", "--data-dir", str(data), "--out",
                str(tmp_path / "o"), "--quiet", "--allow-outside-paths"]) == 0  # fmt: skip


@pytest.mark.parametrize(("rows", "says"), [
    ([{"file_name": "utt0.wav"}, {"file_name": "./utt0.wav"}], "'utt0.wav' is the file already listed on line 3"),
    ([{"file_name": "utt0.wav"}, {"file_name": "sub/../utt0.wav"}], "is the file already listed on line"),
    ([{"file_name": "utt0.wav", "source_item_id": "../../evil"}], "source_item_id '../../evil' is not a valid id"),
    ([{"file_name": "utt0.wav", "source_item_id": "a/b"}], "source_item_id 'a/b' is not a valid id"),
    ([{"file_name": "utt0.wav", "speaker_id": "../x"}], "speaker_id '../x' is not a valid id"),
    ([{"file_name": "utt0.wav", "source_item_id": ".hidden"}], "source_item_id '.hidden' is not a valid id"),
    ([{"file_name": "utt0.wav", "source_item_id": "a__b"}], "source_item_id 'a__b' is not a valid id"),
    ([{"file_name": ""}], "line 2: empty file name"),
])  # fmt: skip
def test_folder_refuses_duplicate_files_and_unsafe_ids(tmp_path: Path, rows: list[dict[str, str]], says: str) -> None:
    data = tiny_folder(tmp_path / "d")
    (data / "sub").mkdir()
    keys = sorted({k for r in rows for k in r})
    write_csv(data, [{k: r.get(k, "") for k in keys} for r in rows])
    with pytest.raises(SourceError) as exc:
        get_source("folder", data)
    assert says in str(exc.value)


# --- progress -----------------------------------------------------------------------------------------------


def test_line_progress_prints_a_line_every_few_percent() -> None:
    buf = io.StringIO()  # not a terminal
    bar = progress(total=200, desc="build volume", unit="shard", file=buf)
    assert isinstance(bar, LineProgress)
    for _ in range(200):
        bar.update()
    bar.close()
    lines = buf.getvalue().splitlines()
    assert len(lines) == 20  # one per 5 %, the last at 100 %, no duplicate at close
    assert lines[0].startswith("build volume:   5% 10/200 shard, 0:00:00 elapsed")
    assert lines[-1].startswith("build volume: 100% 200/200 shard") and "\r" not in buf.getvalue()
    quiet = io.StringIO()
    bar = progress(total=10, file=quiet, disable=True)
    bar.update(10)
    bar.close()
    assert quiet.getvalue() == ""


def test_progress_is_a_tqdm_bar_on_a_terminal_and_obeys_the_env(monkeypatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    from tqdm.auto import tqdm

    bar = progress(total=3, file=Tty())
    assert isinstance(bar, tqdm)
    bar.close()
    monkeypatch.setenv("VOCALGRAD_PROGRESS", "lines")
    assert isinstance(progress(total=3, file=Tty()), LineProgress)


def test_build_prints_progress_lines_into_a_log(tmp_path: Path, capsys) -> None:
    data = tiny_folder(tmp_path / "d", n=4)
    fbuild(data, tmp_path / "o", clips_per_shard=1, progress=True)
    err = capsys.readouterr().err
    assert [ln.split(",")[0] for ln in err.splitlines()] == [f"build volume: {p:3d}% {k}/4 shard" for p, k in
                                                             ((25, 1), (50, 2), (75, 3), (100, 4))]  # fmt: skip


@pytest.mark.parametrize("file_name", ["../secret.wav", "audio/../../secret.wav", "ABS"])
def test_release_layout_reads_only_inside_its_folder(tmp_path: Path, file_name: str) -> None:
    from harness.data import ReleaseSource
    from vocalgrad_dataset.fileio import PathOutsideError

    rel = tmp_path / "release"
    (rel / "audio").mkdir(parents=True)
    write_wav_pcm16(tmp_path / "secret.wav", speechlike(), SR)
    write_wav_pcm16(rel / "audio" / "ok.wav", speechlike(), SR)
    name = str(tmp_path / "secret.wav") if file_name == "ABS" else file_name
    ids = ["p1_01__p1_1__linear__low__up", "p1_01__p1_1__linear__low__down"]
    with open(rel / "metadata.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["file_name", "category", "benchmark_clip_id", "label", "duration_sec"])
        w.writeheader()
        w.writerow({"file_name": "audio/ok.wav", "category": "volume", "benchmark_clip_id": ids[0], "label": "increase",
                    "duration_sec": "1.0"})  # fmt: skip
        w.writerow({"file_name": name, "category": "volume", "benchmark_clip_id": ids[1], "label": "decrease",
                    "duration_sec": "1.0"})  # fmt: skip
    src = ReleaseSource(rel, "test")
    rows = src.rows("volume", src.units("volume"))
    assert next(rows)["benchmark_clip_id"] == ids[0]  # the file inside is read
    with pytest.raises(PathOutsideError, match=rf"metadata.csv: clip {ids[1]}: .*file name {name!r}"):
        next(rows)


def test_alternate_source_decode_reports_its_subtype(tmp_path: Path) -> None:
    from vocalgrad_dataset.sources.alternate import decode_16k

    sf.write(str(tmp_path / "a.wav"), speechlike(), SR, subtype="PCM_16")
    sf.write(str(tmp_path / "b.flac"), speechlike(), 48000, subtype="PCM_24")
    assert decode_16k(tmp_path / "a.wav", clip_name="a").source_format == "PCM_16"
    assert decode_16k(tmp_path / "b.flac", clip_name="b").source_format == "PCM_24"


def test_the_write_probe_survives_another_builds_stale_file_cleanup(tmp_path: Path, monkeypatch) -> None:
    """A concurrent build holding the lock deletes `.*.tmp` files in --out; the writability probe of a build
    still waiting must give it nothing to delete (a named probe failed with "not writable: No such file")."""
    import os as os_module

    from vocalgrad_dataset.build.export import check_out_dir
    from vocalgrad_dataset.fileio import remove_stale_tmp

    out, real_open = tmp_path / "o", os_module.open

    def open_then_clean(path, *args, **kwargs):  # the other build's cleanup runs right after every file creation
        fd = real_open(path, *args, **kwargs)
        remove_stale_tmp(out)
        return fd

    monkeypatch.setattr(os_module, "open", open_then_clean)
    check_out_dir(out)  # raises BuildError("... is not writable ...") when the probe had a name
    assert list(out.iterdir()) == []
