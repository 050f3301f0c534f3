"""The nine transforms and the segment framework against SPEC §2-§3, on real speech."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks import baseline_generator as baseline  # the repository root is on pytest's pythonpath
from vocalgrad_dataset.categories import CATEGORIES, CATEGORY_NAMES
from vocalgrad_dataset.categories.echo import schroeder_ir
from vocalgrad_dataset.dsp import rms, to_pcm16
from vocalgrad_dataset.dsp.segments import crossfade_join, plan_chunks
from vocalgrad_dataset.grid import Condition

SEGMENTED = ("speed", "pitch", "distortion", "roughness", "clarity")


def unit_noise(n: int, seed: int) -> np.ndarray:
    """White Gaussian noise with unit RMS over the whole clip, drawn by numpy (float64 cast to float32)."""
    draw = np.random.default_rng(seed).standard_normal(size=n).astype(np.float32)
    return draw / rms(draw)


def render(name, demo_clip, cond, clip_id="x"):
    _, audio, sr, onset, offset = demo_clip
    (y, sched), = CATEGORIES[name].render_clip(audio, sr, onset, offset, [cond], [clip_id])
    return y, sched


@pytest.mark.parametrize("name", CATEGORY_NAMES)
def test_length_rules(name: str, demo_clip) -> None:
    _, audio, sr, onset, offset = demo_clip
    y, sched = render(name, demo_clip, Condition("linear", "mid", "up"))
    joins = sched.n_steps - 1
    fade = round(0.005 * sr)
    if name in ("volume", "noise", "echo", "vibration"):
        assert len(y) == len(audio)  # no segmenting: length kept
    elif name == "speed":
        # span shrinks by the crossfades and by stretching at rates 0.7..1.3 (~unchanged on average)
        assert abs(len(y) - (len(audio) - joins * fade)) < 0.05 * (offset - onset)
    else:
        assert len(y) == len(audio) - joins * fade  # SPEC: 5 ms lost per join
    assert y.dtype in (np.float32, np.float64) and y.ndim == 1


def test_crossfade_join_overlaps_linearly() -> None:
    a, b = np.ones(10, np.float32), np.zeros(10, np.float32)
    out = crossfade_join([a, b], 4)
    assert len(out) == 16
    np.testing.assert_allclose(out[6:10], [1, 2 / 3, 1 / 3, 0], atol=1e-6)
    assert len(crossfade_join([a, np.ones(2, np.float32)], 4)) == 10  # fade shortened to the short piece


def test_chunk_plans() -> None:
    chunks = plan_chunks(10_000, math.ceil(10_000 / 2400), 2400, 2400, equal_split=False)
    assert [(c.start, c.end) for c in chunks] == [(0, 2400), (2400, 4800), (4800, 7200), (7200, 9600), (9600, 10000)]
    assert (chunks[1].win_start, chunks[1].win_end) == (0, 7200) and chunks[-1].win_end == 10_000
    equal = plan_chunks(10_000, 5, 2400, 2400, equal_split=True)
    assert [c.end for c in equal] == [2000, 4000, 6000, 8000, 10000]


def test_volume_exact_gain_on_integer_scale(demo_clip) -> None:
    samples, _, sr, onset, offset = demo_clip
    y, sched = render("volume", demo_clip, Condition("jump", "low", "up"))
    pcm, _ = to_pcm16(y)
    gains = 10.0 ** (sched.per_sample() / 20.0)
    expected = np.clip(samples.astype(np.float64) * gains, -32768, 32767).astype(np.int16)
    np.testing.assert_array_equal(pcm, expected)
    assert sched.per_sample()[0] == -6.0 and sched.per_sample()[-1] == 6.0


def test_volume_one_condition_per_call_equals_the_batch(demo_clip) -> None:
    # a long source renders one condition per call, from the float32 audio without a float64 copy
    from vocalgrad_dataset.grid import conditions

    _, audio, sr, onset, offset = demo_clip
    conds = conditions()
    batch = [y for y, _ in CATEGORIES["volume"].render_clip(audio, sr, onset, offset, conds, ["x"] * len(conds))]
    for cond, expected in zip(conds, batch, strict=True):
        y, _ = render("volume", demo_clip, cond)
        assert y.dtype == expected.dtype == np.float64
        np.testing.assert_array_equal(y, expected)


def test_pitch_and_speed_leave_audio_outside_span_untouched(demo_clip) -> None:
    _, audio, sr, onset, offset = demo_clip
    for name in ("pitch", "speed"):
        y, _ = render(name, demo_clip, Condition("linear", "high", "up"))
        np.testing.assert_array_equal(y[:onset], audio[:onset])
        np.testing.assert_array_equal(y[len(y) - (len(audio) - offset) :], audio[offset:])


@pytest.mark.parametrize("name", ["distortion", "roughness", "clarity"])
def test_outside_span_processed_at_start_and_end_values_with_rms_match(name: str, demo_clip) -> None:
    _, audio, sr, onset, offset = demo_clip
    y, sched = render(name, demo_clip, Condition("linear", "high", "down"))  # down: pre at the "more" end
    pre = y[:onset]
    assert not np.array_equal(pre, audio[:onset])  # processed at the start value
    if name == "roughness":
        # quiet pre-onset audio quantised to 4 bits is all zeros: RMS matching is skipped (SPEC §2)
        assert np.abs(audio[:onset]).max() < 0.5 / 7 and not pre.any()
    else:
        assert rms(pre) == pytest.approx(rms(audio[:onset]), rel=1e-5)  # RMS matched per window
    post = y[len(y) - (len(audio) - offset) :]
    assert rms(post) == pytest.approx(rms(audio[offset:]), rel=1e-5)


def test_vibration_is_not_rms_matched_and_echo_is(demo_clip) -> None:
    _, audio, sr, onset, offset = demo_clip
    y, _ = render("vibration", demo_clip, Condition("linear", "high", "up"))
    assert rms(y[onset:offset]) < 0.9 * rms(audio[onset:offset])  # the LFO removes energy; nothing restores it
    np.testing.assert_array_equal(y[:onset], audio[:onset])  # depth 0 before onset for "up"
    from scipy.signal import fftconvolve

    wet = fftconvolve(audio, schroeder_ir(sr, 0.9))[: len(audio)]
    y_echo, sched = render("echo", demo_clip, Condition("jump", "high", "down"))
    w = 0.52
    mix = y_echo[:onset] - (1 - w) * audio[:onset]  # = w * wet_rms_matched
    ratio = rms(audio) / rms(wet)
    np.testing.assert_allclose(mix, w * wet[:onset] * ratio, atol=2e-6)


def test_roughness_quantises_to_the_scheduled_bit_depth(demo_clip) -> None:
    from vocalgrad_dataset.categories.roughness import quantise

    x = demo_clip[1][20000:27200]
    q = quantise(x, 4.0, 48000)
    scale = rms(x) / rms(np.round(np.clip(x, -1, 1) * 7) / 7)
    assert len(np.unique(np.round(q / scale * 7, 4))) <= 15  # 4 bits: levels -7..7
    assert rms(q) == pytest.approx(rms(x), rel=1e-6)


def test_distortion_hold_length_and_clamp() -> None:
    from vocalgrad_dataset.categories.distortion import effective_rate, sample_and_hold

    x = np.sin(np.arange(4800) * 0.3).astype(np.float32)
    y = sample_and_hold(x, 6000.0, 48000)
    assert (y[0:8] == y[0]).all() and y[8] != y[7]  # hold = 48000 / 6000 = 8 samples
    assert effective_rate(18000.0, 16000) == 16000.0  # no-op at 16 kHz (SPEC §4)
    np.testing.assert_allclose(sample_and_hold(x, 18000.0, 16000), x, atol=1e-6)


def test_noise_seed_reproducible_and_scaled(demo_clip) -> None:
    _, audio, sr, onset, offset = demo_clip
    a, _ = render("noise", demo_clip, Condition("jump", "high", "up"), clip_id="p1__c1__jump__high__up")
    b, _ = render("noise", demo_clip, Condition("jump", "high", "up"), clip_id="p1__c1__jump__high__up")
    c, _ = render("noise", demo_clip, Condition("jump", "high", "up"), clip_id="p2__c1__jump__high__up")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    np.testing.assert_array_equal(a[:onset], audio[:onset])  # ratio 0 before onset for "up"
    added = a[offset:] - audio[offset:]
    expected = 0.12 * rms(audio[onset:offset]) * rms(unit_noise(len(audio), 7)[offset:])
    assert rms(added) == pytest.approx(expected, rel=0.05)
    assert rms(unit_noise(len(audio), 7)) == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize(("seed", "n"), [(0, 1), (7, 1000), (2**63 + 12345, 300_000), (987654321, 1_000_000)])
def test_noise_draw_is_numpys_standard_normal_bit_for_bit(seed: int, n: int) -> None:
    # the numba PCG64 + ziggurat must give numpy's stream, the rare tail (idx 0) and wedge paths included
    from vocalgrad_dataset.dsp.kernels import pcg64_state, standard_normal_float32_into

    expected = np.random.default_rng(seed).standard_normal(size=(n, 1)).astype(np.float32)[:, 0]
    state = pcg64_state(seed)
    ours = np.empty(n, dtype=np.float32)
    standard_normal_float32_into(state, ours)
    np.testing.assert_array_equal(ours.view(np.uint32), expected.view(np.uint32))
    if n >= 300_000:  # long enough to have passed through the tail path (p ~ 1e-4 per sample)
        assert np.abs(expected).max() > 3.6541528853610087  # beyond ziggurat_nor_r: the tail was drawn
    numpy_rng = np.random.default_rng(seed)
    numpy_rng.standard_normal(size=n)  # the same number of 64-bit words consumed, so the same state after
    assert (int(state[0]) << 64) | int(state[1]) == numpy_rng.bit_generator.state["state"]["state"]


@pytest.mark.parametrize("n", [0, 1, 7, 8, 127, 128, 129, 136, 1000, 8193, 192_000, 254_411])
def test_noise_square_sum_is_numpys_float32_mean_order(n: int) -> None:
    # the noise kernel sums float32 squares itself; numpy's pairwise order differs from a running sum
    from vocalgrad_dataset.dsp.kernels import float32_square_sum

    draw = np.random.default_rng(n).standard_normal(size=(n, 1))
    column = draw.astype(np.float32)
    assert float32_square_sum(draw[:, 0]) == np.add.reduce(column * column, axis=0)[0]
    if n >= 1000:  # a sequential float32 sum of the same squares differs: the order is what is tested
        running = np.float32(0.0)
        for v in column[:, 0] * column[:, 0]:
            running += v
        assert running != float32_square_sum(draw[:, 0])


@pytest.mark.parametrize(("sr", "room"), [(8000, 0.75), (48000, 0.9)])
def test_schroeder_ir_equals_the_per_sample_loop(sr: int, room: float) -> None:
    # the independent baseline builds the IR one sample at a time, as the published script does
    np.testing.assert_array_equal(schroeder_ir(sr, room), baseline.schroeder_ir(sr, room))


@pytest.mark.parametrize("name", ["speed", "pitch", "clarity"])
def test_fast_paths_equal_straightforward_librosa(name: str, demo_clip) -> None:
    """Batched STFT / phase vocoder / ISTFT against one librosa call per window (the independent baseline)."""
    samples, audio, sr, onset, offset = demo_clip
    conds = [Condition("quad_first_flat", "high", "up"), Condition("jump", "low", "down")]
    ids = [f"x__y__{c.curve}__{c.tier}__{c.direction}" for c in conds]
    for (y, _), cid in zip(CATEGORIES[name].render_clip(audio, sr, onset, offset, conds, ids), ids, strict=True):
        ours = to_pcm16(y)[0]
        ref = baseline.render_condition(name, samples, sr, onset / sr, offset / sr, cid)
        assert len(ours) == len(ref)
        # librosa takes np.angle from numpy, whose float32 atan2 has different last bits on AVX-512 CPUs;
        # ours always uses the C library's (the published machine's), so at most one PCM16 step apart there
        assert np.abs(ours.astype(np.int32) - ref).max() <= (1 if name in ("speed", "pitch") else 0)


def test_pcm16_truncates_and_counts_clipping() -> None:
    pcm, clipped = to_pcm16(np.array([0.5, -0.5, 1.0, -1.2, 0.99999, 3e-5, -3e-5]))
    assert pcm.tolist() == [16384, -16384, 32767, -32768, 32767, 0, 0]  # truncation toward zero
    assert clipped == pytest.approx(2 / 7)


@pytest.mark.parametrize("name", SEGMENTED)
def test_batched_render_equals_one_condition_at_a_time(name: str, demo_clip) -> None:
    _, audio, sr, onset, offset = demo_clip
    cat = CATEGORIES[name]
    conds = [Condition("quad_first_flat", "low", "up"), Condition("jump", "low", "down")]
    together = cat.render_clip(audio, sr, onset, offset, conds, ["a", "b"])
    for cond, (y, _) in zip(conds, together, strict=True):
        (alone, _), = cat.render_clip(audio, sr, onset, offset, [cond], ["a"])
        np.testing.assert_array_equal(y, alone)


@pytest.mark.parametrize("n_fft", [32, 33, 100, 300, 511, 512])
def test_librosa_free_helpers_equal_librosa(n_fft: int) -> None:
    """stft.py's numpy copies of librosa's hann window, window sum-square and bin frequencies (so rendering
    needs no librosa import) are bit-identical to librosa's."""
    import librosa

    from vocalgrad_dataset.dsp.stft import fft_frequencies, hann_window, window_sumsquare

    np.testing.assert_array_equal(hann_window(n_fft), librosa.filters.get_window("hann", n_fft, fftbins=True))
    for n_frames, hop in ((1, 128), (7, max(1, n_fft // 4)), (60, 128)):
        expected = librosa.filters.window_sumsquare(
            window="hann", n_frames=n_frames, win_length=n_fft, n_fft=n_fft, hop_length=hop, dtype=np.float32
        )
        np.testing.assert_array_equal(window_sumsquare(n_frames, n_fft, hop), expected)
    for sr in (48000, 16000, 2 * np.pi):
        np.testing.assert_array_equal(fft_frequencies(sr, n_fft), librosa.fft_frequencies(sr=sr, n_fft=n_fft))


def test_rendering_imports_no_librosa() -> None:
    """A process that renders every category never imports librosa or scipy.signal (start-up cost)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from vocalgrad_dataset.categories import CATEGORIES\n"
        "from vocalgrad_dataset.grid import conditions\n"
        "x = (np.sin(np.arange(48000) * 0.05) * 0.3).astype(np.float32)\n"
        "for cat in CATEGORIES.values():\n"
        "    list(cat.render_clip(x, 48000, 4800, 43200, conditions()[:2], ['a__b__c__d__e'] * 2))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'librosa' or m.startswith('scipy.signal')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", ["speed", "pitch", "clarity", "distortion", "roughness", "echo", "vibration", "noise", "volume"])
def test_small_batches_and_chunks_change_nothing(name: str, demo_clip, monkeypatch) -> None:
    """Bounded memory (conditions rendered a few at a time, one window's jobs per window-op call, spectra
    computed 5 windows at a time, nothing cached for the next tier) gives the same samples as one batch."""
    from vocalgrad_dataset.categories import base, echo, vibration
    from vocalgrad_dataset.dsp import segments, stft

    _, audio, sr, onset, offset = demo_clip
    conds = [Condition(c, t, "up" if i % 2 else "down") for i, (c, t) in enumerate([("linear", "low"), ("jump", "mid"), ("quad_last_flat", "high"), ("linear", "high")])]
    ids = [f"x__y__{c.curve}__{c.tier}__{c.direction}" for c in conds]
    together = [y for y, _ in CATEGORIES[name].render_clip(audio, sr, onset, offset, conds, ids)]
    monkeypatch.setattr(base, "BATCH_BYTES", 1)  # one condition per render call
    monkeypatch.setattr(stft, "WINDOWS_PER_CHUNK", 5)
    monkeypatch.setattr(echo, "SPECTRUM_BYTES", 0)
    monkeypatch.setattr(vibration, "LFO_CACHE_BYTES", 0)
    monkeypatch.setattr(segments, "JOB_GROUP_SAMPLES", 1)  # one window's jobs per window-op call
    apart = [y for y, _ in CATEGORIES[name].render_clip(audio, sr, onset, offset, conds, ids)]
    for a, b in zip(together, apart, strict=True):
        np.testing.assert_array_equal(a, b)
