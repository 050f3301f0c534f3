"""One reader of a release's metadata.csv (vocalgrad_dataset.build.manifest.read_release_metadata) serves the harness
(harness.data.ReleaseSource) and the manifests: both see the same rows and give the same one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.data import ReleaseSource
from vocalgrad_dataset.build.manifest import ManifestError, read_release_metadata

IDS = ["p1_01__p1_1__linear__low__up", "p1_01__p1_1__linear__low__down", "p1_01__p1_1__linear__mid__up"]
HEADER = "file_name,category,benchmark_clip_id,duration_sec"


def _release(folder: Path, text: str, encoding: str = "utf-8") -> Path:
    folder.mkdir(parents=True)
    (folder / "metadata.csv").write_text(text, encoding=encoding)
    return folder


def _listing(ids: list[str]) -> str:
    return "\n".join([HEADER, *(f"audio/{i}.wav,volume,{i},1.0" for i in ids)]) + "\n"


def test_rows_carry_their_csv_line(tmp_path: Path) -> None:
    rows = read_release_metadata(_release(tmp_path / "r", _listing(IDS)))
    assert [(r["benchmark_clip_id"], r["_line"]) for r in rows] == [(IDS[0], "2"), (IDS[1], "3"), (IDS[2], "4")]


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    plain = read_release_metadata(_release(tmp_path / "plain", _listing(IDS)))
    bom = _release(tmp_path / "bom", _listing(IDS), encoding="utf-8-sig")
    assert (bom / "metadata.csv").read_bytes()[:3] == b"\xef\xbb\xbf"
    assert read_release_metadata(bom) == plain
    src = ReleaseSource(bom, "test")  # the harness reads the same file the same way
    assert [cid for u in src.units("volume") for cid in u.clip_ids] == IDS


@pytest.mark.parametrize(("text", "says"), [
    ("category,benchmark_clip_id\nvolume,x\n",
     "no 'file_name' column (a release's metadata.csv has file_name, category, benchmark_clip_id)"),
    (HEADER + "\naudio/a.wav,volume," + "x" * 200_000 + ",1.0\n", "malformed CSV"),  # past csv's field limit
])  # fmt: skip
def test_harness_and_manifest_give_the_same_one_line_error(tmp_path: Path, text: str, says: str) -> None:
    rel = _release(tmp_path / "r", text)
    with pytest.raises(ManifestError) as manifest_err:
        read_release_metadata(rel)
    with pytest.raises(ValueError) as harness_err:
        ReleaseSource(rel, "test").units("volume")
    assert str(manifest_err.value) == str(harness_err.value)
    assert str(harness_err.value).startswith(f"{rel / 'metadata.csv'}: ") and says in str(harness_err.value)
    assert "\n" not in str(harness_err.value)


def test_not_utf8_names_the_file(tmp_path: Path) -> None:
    rel = tmp_path / "r"
    rel.mkdir()
    (rel / "metadata.csv").write_bytes(_listing(IDS[:1]).encode() + b"audio/b.wav,volume,caf\xe9,1.0\n")
    with pytest.raises(ValueError, match=r"metadata.csv: not UTF-8 text"):
        ReleaseSource(rel, "test").units("volume")
