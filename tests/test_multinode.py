"""Issue 23: the dataset build across nodes. The stream has one shard per source clip, so
`datasets.distributed.split_dataset_by_node` hands each node whole source clips: the nodes' parts are disjoint
and together hold every clip (the README's multi-node recipe). The evaluation across machines is
tests/test_runner.py::test_accelerate_two_machines_on_loopback."""

from __future__ import annotations

import pytest
from datasets.distributed import split_dataset_by_node

from vocalgrad_dataset import VocalGrad


@pytest.mark.slow
def test_stream_splits_by_node_into_whole_source_clips() -> None:
    stream = VocalGrad(config_name="volume", source="demo").as_streaming_dataset(split="test")
    assert stream.n_shards == 3  # the demo: 3 source clips, 24 conditions each
    parts = [[(r["benchmark_clip_id"], r["source_clip_id"]) for r in split_dataset_by_node(stream, rank=k, world_size=3)]
             for k in range(3)]
    ids = [cid for part in parts for cid, _ in part]
    assert len(ids) == len(set(ids)) == 3 * 24  # disjoint, and together every clip
    assert [len({src for _, src in part}) for part in parts] == [1, 1, 1]  # one whole source clip per node
