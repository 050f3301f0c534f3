"""Bad input and faults, round three (issue 22): each case of the issue reproduced for real and answered by one
clear line naming the file, clip or field, or by the right behaviour."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli import main as harness
from tests.test_faults_dataset import fbuild, tiny_folder
from vocalgrad_dataset.buildinfo import BuildMismatchError
from vocalgrad_dataset.export import build


def _one_line(capsys: pytest.CaptureFixture[str], code: int, *needles: str) -> str:
    """A user error: exit 2, one `error:` line holding every needle, no traceback."""
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """volume and noise of 3 source clips, one clip per shard: 3 shards and 72 rows per config."""
    root = tmp_path_factory.mktemp("built")
    data = tiny_folder(root / "src", n=3)
    fbuild(data, root / "C", clips_per_shard=1)
    build("noise", ["test"], root / "C", source="folder", data_dir=str(data), clips_per_shard=1, progress=False)
    return root / "C"


def _copy(built: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "C"))


def _eval(dataset: Path, out: Path, *extra: str) -> int:
    return harness(["eval", "--model", "always-increase", "--dataset", str(dataset), "--configs", "volume",
                    "--out", str(out), "--no-preflight", *extra])


# ---- 1. a deleted shard ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("manifest", [False, True])
def test_a_deleted_shard_is_named_not_evaluated_around(built: Path, tmp_path: Path, capsys, manifest: bool) -> None:
    c = _copy(built, tmp_path)
    if manifest:
        from vocalgrad_dataset.manifest import write_manifest

        write_manifest(c)
    (c / "volume" / "test-00001-of-00003.parquet").unlink()
    _one_line(capsys, _eval(c, tmp_path / "run"), "test-00001-of-00003.parquet", "missing")
    assert not (tmp_path / "run" / "results.json").exists()


def test_a_deleted_shard_and_its_record_caught_by_the_manifest(built: Path, tmp_path: Path, capsys) -> None:
    from vocalgrad_dataset.buildinfo import RECORD_NAME
    from vocalgrad_dataset.manifest import write_manifest

    c = _copy(built, tmp_path)
    write_manifest(c)
    (c / "volume" / RECORD_NAME).unlink()
    (c / "volume" / "test-00002-of-00003.parquet").unlink()
    for f in (c / "volume").glob("*.parquet"):  # renumbered as if the set were complete
        f.rename(f.with_name(f.name.replace("-of-00003", "-of-00002")))
    _one_line(capsys, _eval(c, tmp_path / "run"), "manifest.csv", "24 clip(s) of 'volume'")


# ---- 2. a shard of another config under this config's name -----------------------------------------------------
def test_a_shard_of_another_config_is_refused_by_eval_and_by_a_rebuild(built: Path, tmp_path: Path, capsys) -> None:
    c = _copy(built, tmp_path)
    victim = c / "volume" / "test-00001-of-00003.parquet"
    shutil.copyfile(c / "noise" / "test-00001-of-00003.parquet", victim)
    _one_line(capsys, _eval(c, tmp_path / "run"), str(victim), "'noise'", "not 'volume'")
    with pytest.raises(BuildMismatchError, match="test-00001-of-00003.parquet holds rows of config 'noise'"):
        fbuild(built.parent / "src", c, clips_per_shard=1)


# ---- 0-byte shard ------------------------------------------------------------------------------------------------
def test_an_empty_shard_is_named(built: Path, tmp_path: Path, capsys) -> None:
    c = _copy(built, tmp_path)
    victim = c / "volume" / "test-00002-of-00003.parquet"
    victim.write_bytes(b"")
    _one_line(capsys, _eval(c, tmp_path / "run"), str(victim), "0 bytes")
