"""Issue 34: a config name is resolved once into a TaskConfig, and VoxParadox-lite configs run without a build.

The in-memory item rows are compared with the rows ParquetSource reads back from a real `vocalgrad-dataset
build` (the reference is the build's Parquet file, read with pyarrow/soundfile here, not through our source).
"""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from harness.cli import main as cli_main
from harness.data import ConfigSource, ItemSource, ParquetSource, open_source
from harness.results import read_jsonl, samples_path
from vocalgrad_dataset import generate
from vocalgrad_dataset.build.export import build
from vocalgrad_dataset.tasks import TaskConfig, resolve
from vocalgrad_dataset.voxparadox.export import build_voxparadox

CONFIG = "voxparadox-pitch"
N = 3  # items built by the build under test (its first items in build order)


def test_resolution_is_one_typed_object() -> None:
    c = resolve("voice_pitch-yesno")  # an alias
    assert isinstance(c, TaskConfig) and c == "pitch-yesno" and c.kind == "yesno" and c.rows == "generate"
    assert c.source == "vctk" and c.spec is not None and c.spec.recipe.sources and c.spec.labels == ("no", "yes")
    assert resolve(c) is c and generate.config_spec(c) is c.spec  # the object is never parsed again
    v = resolve(CONFIG)
    assert (v.kind, v.family, v.rows, v.source, dict(v.params)) == ("mcq", "voxparadox", "items", None, {"task": "pitch"})
    back = pickle.loads(pickle.dumps(v))  # DataLoader workers and accelerate ranks receive it whole
    assert isinstance(back, TaskConfig) and back.params == {"task": "pitch"} and repr(back) == "'voxparadox-pitch'"
    with pytest.raises(ValueError, match=r"unknown config 'voxparadox-pich'; did you mean 'voxparadox-pitch'"):
        resolve("voxparadox-pich")
    with pytest.raises(ValueError, match=r"'voxparadox-pitch' is a voxparadox config \(its rows are built items\)"):
        generate.config_spec(v)


def test_a_config_name_is_parsed_once_through_a_build_and_an_eval(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Follow `voice_pitch-yesno` (an alias) from the build through an eval of the build: the string parser
    runs once for the alias, and the canonical name it resolves to is never resolved on its own."""
    import vocalgrad_dataset.tasks as dtasks

    monkeypatch.setattr(dtasks, "_RESOLVED", {})
    calls: list[str] = []
    real = dtasks._resolve
    monkeypatch.setattr(dtasks, "_resolve", lambda name: (calls.append(name), real(name))[1])
    build("voice_pitch-yesno", ["test"], tmp_path / "D", source="demo", progress=False)
    out = tmp_path / "R"
    assert cli_main(["eval", "--model", "always-increase", "--configs", "voice_pitch-yesno", "--dataset",
                     str(tmp_path / "D"), "--limit", "4", "--out", str(out)]) == 0
    assert len(read_jsonl(samples_path(out, "pitch-yesno"))) == 4
    # ("pitch", the category the results group by, is another config name, looked up on its own)
    assert [c for c in calls if c.endswith("-yesno")] == ["voice_pitch-yesno"]


def _build_rows(path: Path) -> dict[str, dict]:
    """The reference: a build's Parquet rows, audio decoded by soundfile."""
    out = {}
    for row in pq.read_table(path).to_pylist():
        data, sr = sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="float32")
        out[row["benchmark_clip_id"]] = {**row, "audio": data, "sr": sr}
    return out


def test_in_memory_items_equal_a_build(tmp_path: Path) -> None:
    build_voxparadox(CONFIG, ["test"], tmp_path, limit=N)
    ref = _build_rows(tmp_path / CONFIG / "test-00000-of-00001.parquet")
    assert len(ref) == N
    mem = ItemSource("test")
    units = mem.units(CONFIG)
    assert len(units) == 100 and [u.key for u in units[:N]] == list(ref)  # the frozen ids, in build order
    got = list(mem.rows(CONFIG, units[:N]))
    built = list(ParquetSource(tmp_path, "test").rows(CONFIG, ParquetSource(tmp_path, "test").units(CONFIG)))
    for mine, theirs in zip(got, built, strict=True):  # every field ParquetSource yields, the audio bit for bit
        assert {k: v for k, v in mine.items() if k != "audio"} == {k: v for k, v in theirs.items() if k != "audio"}
        assert np.array_equal(mine["audio"]["array"], theirs["audio"]["array"])
    for row in got:  # and the build's own columns, read without our code
        r = ref[row["benchmark_clip_id"]]
        assert (row["question"], row["options"], row["answer"], row["adversarial"]) == (
            r["question"], r["options"], r["answer"], r["adversarial"])
        assert np.array_equal(row["audio"]["array"], r["audio"]) and row["audio"]["sampling_rate"] == r["sr"] == 16000
    # a subset (one rank's units, a resume) builds only its own items, identical to the full-order ones
    assert [r["benchmark_clip_id"] for r in mem.rows(CONFIG, units[1:2])] == [units[1].key]


def test_every_config_runs_without_a_build(tmp_path: Path) -> None:
    src = open_source("test", "demo")
    assert isinstance(src, ConfigSource) and src.config_description(CONFIG) == "items:voxparadox-lite"
    out = tmp_path / "R"
    assert cli_main(["eval", "--model", "mcq-signal-oracle", "--configs", f"{CONFIG},voxparadox-gender-reversed",
                     "--limit", "3", "--out", str(out)]) == 0
    for c in (CONFIG, "voxparadox-gender-reversed"):
        rows = read_jsonl(samples_path(out, c))
        assert len(rows) == 3 and all(r["pred"] == r["gold"] for r in rows)  # the signal oracle reads the truth
    assert all(r["benchmark_clip_id"].endswith("-rev") for r in read_jsonl(samples_path(out, "voxparadox-gender-reversed")))
    # the run says where its rows came from: the items, not the generator it never used
    assert json.loads((out / "results.json").read_text())["config"]["source"] == "items:voxparadox-lite"


@pytest.mark.parametrize(("config", "published"), [
    ("pitch", "voice_pitch"), ("speed", "speaking_speed"), ("beep-pitch", "beep-voice_pitch"),
    ("pitch-ternary", "voice_pitch-ternary"), ("volume-yesno", "volume-yesno"), ("echo-source", "echo-source"),
    ("pitch-conflict-reversed", "voice_pitch-conflict-reversed"),
])
def test_published_names_put_the_release_name_in_the_config_name(config: str, published: str) -> None:
    from vocalgrad_dataset.tasks import published_name

    assert published_name(config) == published
