"""`vocalgrad-dataset build --config voxparadox-<task>`: VoxParadox-lite items to Parquet + a data card.

Layout as for the VocalGrad configs: DIR/<config>/<split>-00000-of-00001.parquet (written to a temporary
name and renamed) and DIR/README.md, whose `configs:` block lets `datasets.load_dataset(DIR, config)` read
every VoxParadox-lite config in the folder. No synthesiser runs: the items are made from the vendored base
utterances (voxparadox.py). Rows: benchmark_clip_id, audio, task (the config), task_name (the release's name of the task), question,
options, answer, adversarial (the release's wordings), script (what is said, segment by segment), measured (the
label read back from the signal), bases, duration_sec.
"""

from __future__ import annotations

import io
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import soundfile as sf

from vocalgrad_dataset.fileio import atomic_path, atomic_write_text, dir_lock
from vocalgrad_dataset.tasks import resolve
from vocalgrad_dataset.voxparadox import (
    BUILDER_VERSION,
    IDS_DIR,
    RELEASE_TASKS,
    SR,
    Item,
    frozen_entries,
    frozen_ids,
    pcm_sha256,
    reverse_item,
)
from vocalgrad_dataset.voxparadox.items import build_items, frozen_plan

CARD_NAME = "README.md"


def features() -> Any:
    """The datasets Features of a VoxParadox-lite row."""
    import datasets

    text = datasets.Value("string")
    return datasets.Features({
        "benchmark_clip_id": text, "audio": datasets.Audio(sampling_rate=SR), "task": text, "task_name": text,
        "question": text,
        "options": datasets.Sequence(text), "answer": text, "adversarial": text, "script": text, "measured": text,
        "bases": datasets.Sequence(text), "duration_sec": datasets.Value("float32"),
    })  # fmt: skip


def item_row(item: Item, config: str) -> dict[str, Any]:
    """One item as a row (audio as PCM16 WAV bytes)."""
    buf = io.BytesIO()
    sf.write(buf, item.audio, SR, subtype="PCM_16", format="WAV")
    return {"benchmark_clip_id": item.id, "audio": {"bytes": buf.getvalue(), "path": f"{item.id}.wav"},
            "task": config, "task_name": RELEASE_TASKS[item.task], "question": item.question,
            "options": list(item.options), "answer": item.answer, "adversarial": item.adversarial, "script": item.script, "measured": item.measured,
            "bases": list(item.bases), "duration_sec": len(item.audio) / SR}


def lite_params(config: str) -> Any:
    """A VoxParadox-lite config's params (its `task`); a declared config without one (a published benchmark
    read from its own dataset) is one line saying so."""
    resolved = resolve(config)
    if "task" not in resolved.params:
        raise ValueError(f"config {config!r} ({resolved.family}) is read from its own dataset, not built here: "
                         f"harness eval --configs {config} [--dataset PATH] (docs/published-benchmarks.md)")
    return resolved.params


def config_items(config: str, split: str, n: int | None = None) -> list[Item]:
    """A config's items of a split (the reversed control reverses the built items), checked against the
    frozen ids when the full split is built."""
    params = lite_params(config)
    items = build_items(str(params["task"]), split, n)
    if params.get("reversed"):
        items = [reverse_item(i) for i in items]
    frozen = frozen_entries(str(params["task"]), split)
    if n is None and frozen is not None:
        ids = [(i.id.removesuffix("-rev"), pcm_sha256(i.audio[::-1] if params.get("reversed") else i.audio))
               for i in items]
        if ids != frozen:
            first = next((a, b) for a, b in zip([*ids, None], [*frozen, None], strict=False) if a != b)
            raise ValueError(f"{config} {split}: the built items differ from the frozen list (built {first[0]!r} where "
                             f"it has {first[1]!r}); the builder changed: bump BUILDER_VERSION and refreeze")
    return items


def config_item_ids(config: str, split: str) -> list[str]:
    """A config's item ids of a split in build order, without building audio (the frozen list; without one,
    the built items' ids)."""
    params = lite_params(config)
    suffix = "-rev" if params.get("reversed") else ""
    frozen = frozen_ids(str(params["task"]), split)
    if frozen is None:
        return [i.id for i in config_items(config, split)]
    return [f"{i}{suffix}" for i in frozen]


def iter_config_items(config: str, split: str, ids: Collection[str] | None = None) -> Iterator[Item]:
    """The items of a config's split that `ids` names (None: all), in build order, built in memory exactly as
    `build_voxparadox` writes them: each is checked against its frozen PCM sha256, so a row served without a
    build is the row of a build (the signal measurement the build repeats is what chose the frozen items)."""
    params = lite_params(config)
    task, rev = str(params["task"]), bool(params.get("reversed"))
    frozen = frozen_entries(task, split)
    if frozen is None:  # no frozen list (a new task): the checked build, then the wanted items
        yield from (i for i in config_items(config, split) if ids is None or i.id in ids)
        return
    suffix = "-rev" if rev else ""
    wanted = {i for i, _ in frozen} if ids is None else {i.removesuffix(suffix) for i in ids}
    unknown = wanted - {i for i, _ in frozen}
    if unknown:
        raise ValueError(f"{config} {split}: no item {min(unknown)!r} (not in {IDS_DIR / f'{task}-{split}.txt'})")
    cands, plan = frozen_plan(task, split, tuple(i for i, _ in frozen))  # the options a build offers
    for cand, (item_id, digest) in zip(cands, frozen, strict=True):
        if item_id not in wanted:
            continue
        item = cand.make()
        if pcm_sha256(item.audio) != digest:
            raise ValueError(f"{config} {split}: item {item_id} differs from its frozen sha256; the builder changed: "
                             "bump BUILDER_VERSION and refreeze")
        item.measured = item.answer  # its frozen sha256 is that of the item whose signal measured this label
        item.options = list(plan[item_id])
        yield reverse_item(item) if rev else item


def card_text(out: Path) -> str:
    """README.md: the `configs:` block for every VoxParadox-lite config folder in `out`, and what they are."""
    configs = sorted(p.name for p in out.iterdir() if p.is_dir() and any(p.glob("*.parquet")))
    lines = ["---", "configs:"]
    for c in configs:
        lines += [f"- config_name: {c}", "  data_files:"]
        for split in sorted({f.name.split("-")[0] for f in (out / c).glob("*.parquet")}):
            lines += [f"  - split: {split}", f"    path: {c}/{split}-*.parquet"]
    lines += ["---", "", "# VoxParadox-lite (built offline)", "",
              f"Built by vocalgrad-dataset (VoxParadox-lite builder v{BUILDER_VERSION}) from espeak-ng base utterances "
              "and our own DSP. Each item's transcript asserts a wrong label (`adversarial`); the audio carries "
              "`answer`, which was measured back from the signal (`measured`). Task names (`task_name`), questions "
              "and option texts are the release's; answers are balanced over the letters and, where an item offers "
              "all its task's labels, over the labels. Builder v4 re-froze the items of v3 (new gender, intonation, "
              "counting and identity items; the pattern tasks' items kept, their labels renamed low / medium / "
              "high). Synthetic voices: not the VoxParadox release, not comparable with its numbers.", ""]
    return "\n".join(lines)


def build_voxparadox(config: str, splits: Sequence[str], out_dir: str | Path, *, overwrite: bool = False,
                     lock_timeout: float | None = None, limit: int | None = None) -> dict[str, Any]:
    """Write a VoxParadox-lite config's splits and the folder's card; a finished split is kept unless `overwrite`.
    `limit`: only the first items of each split (tests; not the frozen set)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    foreign = [p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith("voxparadox-")
               and any(p.glob("*.parquet"))]
    if foreign:
        raise ValueError(f"{out} holds VocalGrad configs ({', '.join(sorted(foreign))}); build VoxParadox-lite into "
                         "a folder of its own")
    feats = features()
    written = 0
    with dir_lock(out, timeout=lock_timeout, what="a VoxParadox-lite build"):
        for split in splits:
            path = out / config / f"{split}-00000-of-00001.parquet"
            if path.exists() and not overwrite:
                continue
            rows = [feats.encode_example(item_row(i, config)) for i in config_items(config, split, limit)]
            table = pa.Table.from_pylist(rows, schema=feats.arrow_schema)
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp:
                pq.write_table(table, tmp)
            written += len(rows)
        atomic_write_text(out / CARD_NAME, card_text(out))
    return {"config": config, "splits": list(splits), "written_rows": written}
