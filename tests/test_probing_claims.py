"""Probing on lexical-conflict rows: a `claim` probe target and direction probes scored by congruence."""

from __future__ import annotations

from typing import Any

import numpy as np

from probing.probes import ProbeJob, ProbeSettings, fit_jobs, probe_metrics
from probing.store import RowTable
from probing.train import claim_jobs, congruence_groups

CLAIMS = ["increase", "decrease", "none", "increase", "decrease", "none"] * 8


class Features:
    """A feature set whose one feature is +1 where the words claim "increase", -1 otherwise."""

    def __init__(self) -> None:
        n = len(CLAIMS)
        labels = ["increase" if i % 2 else "decrease" for i in range(n)]
        congruent = ["None" if c == "none" else str(c == lab) for c, lab in zip(CLAIMS, labels, strict=True)]
        self.rows = RowTable({"claim": list(CLAIMS), "congruent": congruent, "label": labels})
        self.representations = {"enc/0": 1}

    def load(self, key: str, dtype: Any = np.float32) -> np.ndarray:
        return np.array([[1.0 if c == "increase" else -1.0] for c in CLAIMS], dtype=dtype)


def test_claim_probe_reads_the_words_claim() -> None:
    fs = Features()
    jobs = claim_jobs(fs, fs, "volume-conflict", ["enc/0"])
    assert [j.key for j in jobs] == [("enc/0", "volume-conflict/claim")]
    assert len(jobs[0].y_train) == 32  # the rows that claim something (16 neutral rows left out)
    # 32 rows are one batch an epoch: a larger step than SPEC §6's 1e-3 lets 200 steps get past the random init
    (_, metrics), = fit_jobs(jobs, ProbeSettings(lr=0.05)).values()
    assert metrics["accuracy"] == 1.0


def test_congruence_groups_and_split_scores() -> None:
    groups = congruence_groups(Features().rows)
    assert {k: int(v.sum()) for k, v in groups.items()} == {"congruent": 16, "incongruent": 16, "neutral": 16}
    assert congruence_groups(RowTable({"claim": [""] * 4, "congruent": [""] * 4})) is None  # not a conflict set
    # by hand: right on rows 0 and 1, wrong on 2 and 3; groups split them 2/0 and 0/2
    out = probe_metrics(np.array([1.0, -1.0, 1.0, -1.0]), np.array([1, 0, 0, 1]),
                        {"a": np.array([1, 1, 0, 0], bool), "b": np.array([0, 0, 1, 1], bool)})
    assert out["by_group"]["a"]["accuracy"] == 1.0 and out["by_group"]["b"]["accuracy"] == 0.0
    assert isinstance(ProbeJob(("k",), np.zeros((2, 1)), np.zeros(2), test_groups=groups).test_groups, dict)
