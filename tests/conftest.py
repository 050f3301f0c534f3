"""Shared fixtures: a real demo clip at 48 kHz and its speech span."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Before any test module imports `datasets`: a fresh datasets cache per session (pytest reuses tmp paths,
    and a cached Arrow file of an earlier build under the same path would be served instead of the build
    under test), and no Hub access."""
    os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="vocalgrad-hf-cache-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def demo_clip() -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """(int16 samples, float32 audio, sr, onset, offset) of the shortest demo test clip."""
    from vocalgrad_dataset.generate import speech_span
    from vocalgrad_dataset.sources import get_source

    src = get_source("demo")
    clip = next(c for c in src.clips("test") if c.source_clip_id == "arctic_a0009")
    pcm = src.read(clip)
    onset, offset = speech_span(clip, pcm.samples, pcm.sample_rate)
    return pcm.samples, pcm.float32, pcm.sample_rate, onset, offset


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op thread for a module's tiny-model training: it gains nothing from more on a shared CI box.
    Use with `pytestmark = pytest.mark.usefixtures("one_torch_thread")`."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def shims(tmp_path):
    """The fake Kimi-Audio, MiMo-Audio and Step-Audio 2 runtimes importable under their modules' names
    (tests/helpers/runtime_finetune.installed); the folder of the import shims."""
    from tests.helpers.runtime_finetune import installed

    yield from installed(tmp_path)
