"""Working memory per clip: peak RSS grows with the source's length by a bounded number of bytes per sample.

The published generator renders the whole source (the clip is as long as it), so memory cannot be
independent of the length; what is bounded is how much each extra source sample costs. Each measurement
runs in a fresh process (ru_maxrss only grows) that streams one condition of a synthetic 48 kHz source as
WAV rows, the way a build does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SR = 48_000
SHORT_SEC, LONG_SEC = 10.0, 40.0
# Measured on a 2-core AMD EPYC (15 s vs 60 s, source made whole in float64): speed 34, pitch 38, clarity 25,
# distortion 16, noise 24, echo 51 bytes per source sample; speed 72 here (10 s vs 40 s). Pitch gave 157 here
# when it kept one soxr resampler per distinct rate (a linear curve: one per step) until the end.
MAX_BYTES_PER_SAMPLE = 96

CHILD = """
import resource, sys
import numpy as np
from vocalgrad_dataset.generate import iter_rows
from vocalgrad_dataset.grid import clip_id, conditions
from vocalgrad_dataset.sources import PCM, SourceClip

name, n = sys.argv[1], int(float(sys.argv[2]) * 48000)
rng = np.random.default_rng(0)
speech = np.empty(n, dtype=np.int16)
for a in range(0, n, 2**20):  # in pieces: float64 temporaries of the whole source would dominate the peak
    t = np.arange(a, min(n, a + 2**20))
    speech[a : a + len(t)] = np.sin(t * 0.05) * 8000 + rng.normal(0, 300, len(t))

class Synthetic:
    def read(self, clip):
        return PCM(speech, 48000)

if int(sys.argv[4]):  # a 20-minute source renders one condition per call: the same here on a short one
    import vocalgrad_dataset.categories.base as base
    base.BATCH_BYTES = 1

clip = SourceClip("long_01", "long", "spk", "", "long.wav", 1.0, n / 48000 - 1.0)
# 0 = linear, low, up: a distinct value every step; 2 = linear, mid, up
wanted = [conditions()[int(i)] for i in sys.argv[3].split(",")]
ids = {clip_id("long_01", "long", c) for c in wanted}
rows = 0
for row in iter_rows(name, "test", Synthetic(), clips=[clip], audio_format="wav", ids=ids):
    rows += 1
    del row  # streamed: a writer holds one row at a time
assert rows == len(wanted), rows
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def peak_rss_bytes(category: str, seconds: float, conditions: str = "0", one_per_batch: bool = False) -> int:
    """Peak RSS of a fresh process that renders conditions (indices into the grid, e.g. "0,2") of a
    `seconds`-long synthetic source; `one_per_batch`: each condition its own render call, as for a long source."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, category, str(seconds), conditions, str(int(one_per_batch))],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("category", ["pitch", "speed", "echo"])
def test_peak_memory_per_source_sample_is_bounded(category: str) -> None:
    short, long = peak_rss_bytes(category, SHORT_SEC), peak_rss_bytes(category, LONG_SEC)
    per_sample = (long - short) / ((LONG_SEC - SHORT_SEC) * SR)
    assert per_sample <= MAX_BYTES_PER_SAMPLE, (
        f"{category}: {per_sample:.0f} bytes of peak RSS per source sample"
    )


@pytest.mark.slow
@pytest.mark.parametrize("category", ["volume", "vibration"])
def test_peak_memory_does_not_grow_with_the_conditions_rendered(category: str) -> None:
    # A second condition must not find the first one's output or schedule still alive (zip's reused result
    # tuple held them: 60 s, +17 MB for volume, +35 MB for vibration; now +0 and +3 MB).
    seconds = 60.0
    one, two = (peak_rss_bytes(category, seconds, conds, one_per_batch=True) for conds in ("0", "0,2"))
    output = 8 * seconds * SR  # one float64 output
    assert two - one < output / 3, f"{category}: {(two - one) / 2**20:.0f} MB more peak RSS for a second condition"
