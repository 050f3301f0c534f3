"""Grid, ids and parameter schedules (SPEC §2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vocalgrad_dataset.categories import CATEGORIES, CATEGORY_NAMES, get_category
from vocalgrad_dataset.dsp.schedule import continuous, stepped
from vocalgrad_dataset.generate import config_ids
from vocalgrad_dataset.grid import (
    BEEP_IDS_SHA256,
    TEST_IDS_SHA256,
    Condition,
    conditions,
    ids_sha256,
    iter_ids,
    parse_clip_id,
    progress,
)


@pytest.mark.parametrize("config", CATEGORY_NAMES)
def test_test_split_ids_hash_to_spec(config: str) -> None:
    ids = config_ids(config, "test")  # the frozen VCTK list alone
    assert len(ids) == 2400 and len(set(ids)) == 2400
    assert ids_sha256(ids) == TEST_IDS_SHA256


def test_train_ids_and_beep_hash() -> None:
    assert len(set(config_ids("pitch", "train"))) == 12000
    beep = list(iter_ids((f"beep_{i:02d}", f"beep_{i:02d}") for i in range(1, 11)))
    assert ids_sha256(beep) == BEEP_IDS_SHA256


def test_grid_has_24_balanced_conditions_and_ids_round_trip() -> None:
    grid = conditions()
    assert len(grid) == 24 and len(set(grid)) == 24
    assert sum(c.label == "increase" for c in grid) == 12
    assert parse_clip_id("p226_01__p226_106__linear__low__up") == ("p226_01", "p226_106", Condition("linear", "low", "up"))
    with pytest.raises(ValueError, match="p226_106__bogus"):
        parse_clip_id("p226_01__p226_106__bogus__low__up")


def test_progress_curves() -> None:
    t = np.array([0.0, 0.25, 0.49, 0.5, 1.0])
    np.testing.assert_allclose(progress("linear", t), t)
    np.testing.assert_allclose(progress("quad_first_flat", t), t**2)
    np.testing.assert_allclose(progress("quad_last_flat", t), 1 - (1 - t) ** 2)
    np.testing.assert_array_equal(progress("jump", t), [0, 0, 0, 1, 1])


@pytest.mark.parametrize("curve", ["linear", "quad_first_flat", "quad_last_flat", "jump"])
def test_stepped_schedule_values_every_curve(curve: str) -> None:
    sr, onset, offset, n = 48000, 1000, 1000 + 2400 * 10 + 7, 40000
    s = stepped(onset, offset, n, sr, -3.0, 3.0, curve)
    steps = math.ceil((offset - onset) / 2400)
    assert s.n_steps == steps == 11
    t = np.arange(steps) / (steps - 1)
    np.testing.assert_allclose(s.values, -3.0 + 6.0 * progress(curve, t))
    per = s.per_sample()
    assert (per[:onset] == -3.0).all() and (per[offset:] == 3.0).all()
    assert per[onset + 2400 * 3] == s.values[3] and per[offset - 1] == s.values[-1]


def test_single_step_schedule_uses_t_1() -> None:
    s = stepped(0, 1000, 1000, 48000, 0.0, 1.0, "linear")
    assert s.n_steps == 1 and s.values[0] == 1.0


def test_continuous_schedule() -> None:
    s = continuous(10, 110, 200, 0.0, 0.5, "quad_last_flat")
    per = s.per_sample()
    assert per[:10].max() == 0.0 and (per[110:] == 0.5).all()
    np.testing.assert_allclose(per[10:110], 0.5 * progress("quad_last_flat", np.linspace(0, 1, 100)))


@pytest.mark.parametrize(
    ("name", "less", "more"),
    [("speed", 0.6, 1.4), ("pitch", -3, 3), ("volume", -18, 18), ("distortion", 48000, 6000), ("roughness", 16, 4),
     ("noise", 0, 0.12), ("echo", 0, 0.52), ("clarity", 1200, 24000), ("vibration", 0, 0.9)],
)  # fmt: skip
def test_high_tier_endpoints_and_direction(name: str, less: float, more: float) -> None:
    cat = CATEGORIES[name]
    up = cat.schedule(Condition("linear", "high", "up"), 4800, 48000, 60000, 48000)
    down = cat.schedule(Condition("linear", "high", "down"), 4800, 48000, 60000, 48000)
    assert (up.start, up.end) == pytest.approx((less, more))
    assert (down.start, down.end) == pytest.approx((more, less))


def test_aliases_and_did_you_mean() -> None:
    assert get_category("voice_pitch").name == "pitch"
    assert get_category("background-noise").name == "noise"
    with pytest.raises(KeyError, match="did you mean.*volume"):
        get_category("volum")
