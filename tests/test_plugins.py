"""Entry points: an installed third-party package adds a tenth category, a source and a model.

The package below is the README's worked example ("Adding a category"), installed the way pip installs it
(a module beside a `*.dist-info` folder whose entry_points.txt names the three objects), then used only
through the public commands: build, load_dataset, evaluate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

PLUGIN = '''
"""vocalgrad-hum: mains hum whose level rises or falls over the speech (a tenth VocalGrad category)."""

import numpy as np

from harness.models.baselines import LabelBaseline
from harness.models.base import query_audio
from harness.models.registry import LazyFactory, ModelEntry
from vocalgrad_dataset.categories import Category
from vocalgrad_dataset.dsp import rms
from vocalgrad_dataset.sources import DemoSource

HUM_HZ = 50.0


def render(audio, sr, schedules, fixed):
    """A pure function of (audio, sr, schedules): speech + a 50 Hz tone at speech RMS x the stepped ratio."""
    tone = np.sin(2 * np.pi * HUM_HZ * np.arange(len(audio)) / sr).astype(np.float32)
    return [audio + tone * np.float32(rms(audio[s.onset:s.offset])) * s.per_sample().astype(np.float32)
            for s in schedules]


CATEGORY = Category(
    name="hum", attribute="background hum", release_name="background_hum", parameter="hum_ratio",
    tier_key="hum_ratio_max", endpoints=lambda r_max, sr: (0.0, r_max), render=render,
    parameters={"tiers": {"low": {"hum_ratio_max": 0.1}, "mid": {"hum_ratio_max": 0.2},
                          "high": {"hum_ratio_max": 0.4}}},
    description="50 Hz hum scaled by the speech RMS times a ratio stepped every 50 ms",
)


class OneClipDemo(DemoSource):
    """The demo source cut to its first clip per split (a source of one's own)."""

    name = "demo-one"

    def clips(self, split):
        return super().clips(split)[:1]


def hum_level(x, sr):
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return spectrum[int(round(HUM_HZ * len(x) / sr))]


class HumMeter(LabelBaseline):
    """Compares the 50 Hz level of the first and last third of the speech span."""

    name = "hum-meter"

    def decide(self, prompt):
        clip = query_audio(prompt)
        sr, x = clip.sampling_rate, np.asarray(clip.array, np.float64)
        a, b = round(prompt.meta["onset_sec"] * sr), round(prompt.meta["offset_sec"] * sr)
        third = (b - a) // 3
        first, last = hum_level(x[a:a + third], sr), hum_level(x[b - third:b], sr)
        return ("increase" if last > first else "decrease"), float(abs(last - first))


MODEL = ModelEntry("hum-meter", "baseline", "reads the 50 Hz hum trend (vocalgrad-hum)",
                   LazyFactory("vocalgrad_hum:HumMeter"))
'''

ENTRY_POINTS = """[vocalgrad.categories]
hum = vocalgrad_hum:CATEGORY

[vocalgrad.sources]
demo-one = vocalgrad_hum:OneClipDemo

[vocalgrad.models]
hum-meter = vocalgrad_hum:MODEL
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site folder holding the installed plugin package (module + dist-info), as pip would lay it out."""
    site = tmp_path_factory.mktemp("site")
    (site / "vocalgrad_hum.py").write_text(PLUGIN)
    info = site / "vocalgrad_hum-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vocalgrad-hum\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return site


def _run(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_installed_plugin_category_source_and_model_work_end_to_end(site: Path, tmp_path: Path) -> None:
    out = tmp_path / "build"
    done = _run(site, "-m", "vocalgrad_dataset.cli", "build", "--config", "hum", "--split", "test",
                "--source", "demo-one", "--out", str(out))
    assert done.returncode == 0, done.stderr
    import datasets

    rows = datasets.load_dataset(str(out), "hum", split="test")
    assert len(rows) == 24 and set(rows["category"]) == {"hum"} and set(rows["attribute"]) == {"background hum"}
    assert rows[0]["benchmark_clip_id"].startswith("an4_speaker_01__an4cards_005__")
    # The audio really carries the hum trend: 50 Hz energy at the end vs the start of the speech span.
    for row in rows:
        x, sr = np.asarray(row["audio"]["array"], np.float64), row["audio"]["sampling_rate"]
        a, b = round(row["onset_sec"] * sr), round(row["offset_sec"] * sr)
        third = (b - a) // 3
        spectrum = [np.abs(np.fft.rfft(seg * np.hanning(len(seg))))[round(50.0 * len(seg) / sr)]
                    for seg in (x[a:a + third], x[b - third:b])]
        assert (spectrum[1] > spectrum[0]) == (row["direction"] == "up"), row["benchmark_clip_id"]

    run = tmp_path / "run"
    done = _run(site, "-m", "harness.cli", "eval", "--model", "hum-meter", "--configs", "hum",
                "--dataset", str(out), "--out", str(run))
    assert done.returncode == 0, done.stderr
    results = json.loads((run / "results.json").read_text())
    assert results["metrics"]["hum"]["n"] == 24 and results["metrics"]["hum"]["accuracy"] == 1.0

    listed = _run(site, "-m", "harness.cli", "list-models")
    assert "hum-meter" in listed.stdout


def test_plugin_names_suggest_and_fail_clearly(site: Path) -> None:
    done = _run(site, "-m", "vocalgrad_dataset.cli", "ids", "--config", "humm", "--split", "test")
    assert done.returncode != 0 and "did you mean 'hum'?" in done.stderr and "Traceback" not in done.stderr
    broken = site.parent / "broken"
    broken.mkdir(exist_ok=True)
    info = broken / "vocalgrad_broken-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vocalgrad-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vocalgrad.sources]\nbad = no_such_module:Source\n")
    env_site = f"{broken}{os.pathsep}{site}"
    done = _run(Path(env_site), "-m", "vocalgrad_dataset.cli", "build", "--config", "volume", "--split", "test",
                "--source", "bad", "--out", str(site.parent / "x"))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "entry point 'bad' of vocalgrad.sources (no_such_module:Source, package vocalgrad-broken)" in done.stderr
