"""Any multiple-choice audio benchmark as MCQ rows, through a column mapping (`--mcq-columns`).

`--dataset PATH_OR_REPO --kind mcq --columns audio=...,question=...,options=...,answer=...,adversarial=...,task=...`
names, for each MCQ field, the column that holds it (`id=` optionally names the item id column; default:
`benchmark_clip_id` or `id` when present, else the task and row number). `options=choice_a+choice_b+...` takes
one option per column (empty ones dropped); `groups=category+sub-category` names the columns whose breakdown
results.json and the report show. An adversarial cell may hold a set of labels (a list, or option texts
separated by commas); ALA counts an answer equal to any of them. PATH is a folder of Parquet files
(those of the split when files or folders are named after it), one Parquet / JSON Lines / CSV file, or a Hub
dataset id (read with `datasets.load_dataset`). Every item is checked when the source opens: a missing column
or a repeated id is one line naming the file, the row and the field; an item that cannot be asked (an answer
or adversarial label that is not one of its options, fewer than 2 or more than 4 options, a missing or
unreadable audio file) is skipped and listed (`skipped`: id and reason; results.json `skipped_items`), never
guessed, and counts against --max-error-rate. A source whose every item is skipped is an error.
"""

from __future__ import annotations

import difflib
import io
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.data import SourceUnit, decode_audio
from harness.mcq import normalize_mcq_row
from vocalgrad_dataset.fileio import safe_join

REQUIRED = ("audio", "question", "options", "answer")
OPTIONAL = ("adversarial", "task", "id", "groups")
JOIN = "+"  # options=choice_a+choice_b+...: one option per column (empty ones dropped); groups=a+b: group columns


def parse_column_map(text: str, flag: str, required: Sequence[str], optional: Sequence[str]) -> dict[str, str]:
    """{field: column} from "FIELD=COLUMN,..." given to `flag`: every required field once, no unknown field."""
    fields = (*required, *optional)
    mapping: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, column = (x.strip() for x in part.partition("="))
        if not sep or not key or not column:
            raise ValueError(f"{flag}: expected FIELD=COLUMN, got {part!r}")
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{flag}: unknown field {key!r}{hint} (fields: {', '.join(fields)})")
        if key in mapping:
            raise ValueError(f"{flag}: field {key!r} is mapped twice")
        mapping[key] = column
    missing = [k for k in required if k not in mapping]
    if missing:
        raise ValueError(f"{flag}: no column given for {', '.join(missing)} (required: {', '.join(required)})")
    return mapping


def unique_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items, unchanged, when no two share a benchmark_clip_id; else the error naming both places."""
    seen: dict[str, str] = {}
    for item in items:
        if item["benchmark_clip_id"] in seen:
            raise ValueError(f"{item['_where']}: id {item['benchmark_clip_id']!r} repeats "
                             f"(first at {seen[item['benchmark_clip_id']]}); map id= to a unique column")
        seen[item["benchmark_clip_id"]] = item["_where"]
    return items


def items_fingerprint(items: Sequence[Mapping[str, Any]]) -> str:
    """sha256 of every item's fields and audio reference (bytes, array or path): the run's resume key holds it,
    so a corrected answer or an added item in a mapped file is another run, whatever its format or origin."""
    import hashlib
    import json

    digest = hashlib.sha256()
    for item in items:
        fields = {k: v for k, v in item.items() if k not in ("_where", "audio")}
        digest.update(json.dumps(fields, sort_keys=True, default=str).encode("utf-8"))
        digest.update(_audio_bytes(item.get("audio")))
    return digest.hexdigest()


def _audio_bytes(value: Any) -> bytes:
    """What identifies an item's audio: its encoded bytes, its samples, or its path (a file's own bytes are
    not read here: a path names a file of the dataset folder, whose listing is hashed)."""
    if isinstance(value, Mapping):
        if value.get("bytes"):
            return bytes(value["bytes"])
        if value.get("array") is not None:
            import numpy as np

            return np.asarray(value["array"], dtype=np.float32).tobytes() + str(value.get("sampling_rate")).encode()
        value = value.get("path")
    return str(value).encode("utf-8", "surrogatepass")


def _local_files(path: Path, split: str) -> list[Path]:
    """A file, or a folder's data files of `split` (named after it, or in a folder named after it), else all
    of them: Parquet first, else JSON Lines, JSON or CSV (a metadata file beside its audio)."""
    if path.is_file():
        return [path]
    for pattern in ("*.parquet", "*.jsonl", "*.json", "*.csv"):
        files = sorted(p for p in path.rglob(pattern) if not p.name.startswith("."))
        of_split = [f for f in files if f.name.startswith((f"{split}-", f"{split}."))
                    or split in f.relative_to(path).parts[:-1]]
        if files:
            return of_split or files
    return []


def _read_table(file: Path) -> list[dict[str, Any]]:
    """Rows of one Parquet / JSON Lines / CSV file."""
    import pyarrow as pa

    try:
        if file.suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(file).to_pylist()
        if file.suffix == ".json" and _json_array(file):
            return _json_rows(file)
        if file.suffix in (".jsonl", ".json"):
            import pyarrow.json as pj

            return pj.read_json(file).to_pylist()
        if file.suffix == ".csv":
            import pyarrow.csv as pc

            return pc.read_csv(file).to_pylist()
    except (pa.ArrowException, OSError) as err:
        raise ValueError(f"{file}: not readable ({' '.join(str(err).split())})") from None
    raise ValueError(f"{file}: expected a .parquet, .jsonl, .json or .csv file")


def _json_array(file: Path) -> bool:
    """True when a .json file holds one JSON array (MMAR-meta.json), not JSON Lines."""
    with open(file, encoding="utf-8") as f:
        head = f.read(4096).lstrip()
    return head.startswith("[")


def _json_rows(file: Path) -> list[dict[str, Any]]:
    """The objects of a JSON array file, each a row."""
    import json

    try:
        rows = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{file}: not valid JSON ({err})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{file}: expected a JSON array of objects (one per item)")
    return rows




def column_value(row: Mapping[str, Any], field: str, column: str, where: str) -> Any:
    """A mapped field's value: its column's cell; for `a+b+...`, options' non-empty cells as a list and groups'
    {column: cell}. A missing column is one line naming the field, the column and the columns there are."""
    names = [column] if column in row or JOIN not in column else [c.strip() for c in column.split(JOIN)]
    for name in names:
        if name not in row:
            raise ValueError(f"{where}: --columns {field}={column}: no column {name!r} "
                             f"(columns: {', '.join(map(str, row))})")
    if field == "groups":
        return {name: row[name] for name in names}
    if len(names) == 1:
        return row[names[0]]
    return [row[n] for n in names if row[n] is not None and str(row[n]).strip()]


class MappedMCQSource:
    """MCQ rows of a benchmark whose columns are named by a mapping (module docstring)."""

    def __init__(self, dataset: str | Path, split: str, columns: str | Mapping[str, str], *, kind: Any,
                 hub_config: str | None = None, where: Mapping[str, Any] | None = None) -> None:
        self.kind = kind  # the harness.kinds.Kind its rows are (it carries this source's factory)
        self.split = split
        fields = kind.columns or (REQUIRED, OPTIONAL)  # the kind's (required, optional) mapped fields
        self.mapping = parse_column_map(columns, "--columns", *fields) if isinstance(columns, str) else dict(columns)
        self.root = Path(dataset)
        self.base = self.root if self.root.is_dir() else self.root.parent  # where relative audio paths start
        self.hub_config = hub_config  # the Hub dataset's configuration (datasets' `name`)
        self.where = dict(where or {})  # row filter: column -> a value or a list of accepted values
        self.description = f"{kind.name}:{self.root}"
        self.skipped: list[dict[str, str]] = []  # items that cannot be asked: id, where and reason
        self._items = self._load(str(dataset))
        self.fingerprint = items_fingerprint(self._items)
        self._by_task: dict[str, list[dict[str, Any]]] = {}
        for item in self._items:
            self._by_task.setdefault(item["task"], []).append(item)

    def _load(self, dataset: str) -> list[dict[str, Any]]:
        raw = [(w, i, r) for w, i, r in self._raw_rows(dataset) if self._wanted(r)]
        self._prepare(raw)
        items = [item for where, i, r in raw if (item := self._checked(where, i, r)) is not None]
        if raw and not items:
            first = self.skipped[0]
            raise ValueError(f"{dataset}: every item is skipped; first: {first['where']}: {first['reason']}")
        return unique_ids(items)

    def _wanted(self, row: Mapping[str, Any]) -> bool:
        """True when the row passes the filter: every named column holds one of its accepted values (any case,
        surrounding spaces ignored: "Paralinguistics" is "paralinguistics")."""
        for column, accepted in self.where.items():
            if column not in row:
                raise ValueError(f"{self.root}: filter column {column!r} is not a column "
                                 f"(columns: {', '.join(map(str, row))})")
            values = accepted if isinstance(accepted, list) else [accepted]
            if str(row[column]).strip().lower() not in {str(v).strip().lower() for v in values}:
                return False
        return True

    def _checked(self, where: str, index: int, row: Mapping[str, Any]) -> dict[str, Any] | None:
        """One item, or None when it cannot be asked (listed in `skipped` with its id and the reason)."""
        place, _get, _task, ident = self._fields(where, index, row)  # a missing column stops the run here
        try:
            item = self._item(where, index, row)
            self._check_audio(item)
        except ValueError as err:
            reason = str(err).removeprefix(f"{place}: ")
            self.skipped.append({"id": ident, "where": place, "reason": reason})
            return None
        return item

    def _check_audio(self, item: Mapping[str, Any]) -> None:
        """A local audio file that is missing or whose header is unreadable: the item cannot be asked."""
        value = item["audio"]
        path = value.get("path") if isinstance(value, Mapping) and not value.get("bytes") else value
        if not isinstance(path, str) or not path or (isinstance(value, Mapping) and value.get("array") is not None):
            return
        if not self.root.exists():  # a Hub copy: datasets resolved its files
            return
        import soundfile as sf

        file = safe_join(self.base, path, where=item["_where"], hint="")
        if not file.is_file():
            raise ValueError(f"audio file {path!r} is missing")
        if not self._sound_file(file):
            return
        try:
            sf.info(str(file))
        except (sf.LibsndfileError, RuntimeError, OSError) as err:
            raise ValueError(f"audio file {path!r} is unreadable ({' '.join(str(err).split())[:120]})") from None

    def _sound_file(self, file: Path) -> bool:
        """True when soundfile reads the file (its header is probed when the source opens)."""
        return True

    def _raw_rows(self, dataset: str) -> list[tuple[str, int, dict[str, Any]]]:
        """(where, index, row) of every row: local files, else a Hub copy."""
        if not self.root.exists():
            return self._hub_rows(dataset)
        files = _local_files(self.root, self.split)
        if not files:
            raise ValueError(f"{self.root}: no data files (give a folder of .parquet, .jsonl, .json or .csv files, "
                             "or one such file)")
        return [(str(f), i, self._folder_audio(f, r)) for f in files for i, r in enumerate(_read_table(f))]

    def _folder_audio(self, file: Path, row: dict[str, Any]) -> dict[str, Any]:
        """A Hub audio folder's metadata row (metadata.jsonl / .csv beside the clips): its `file_name`, relative
        to the metadata file, becomes the `audio` column, as `datasets` reads such a folder."""
        if file.stem != "metadata" or "audio" in row or not isinstance(row.get("file_name"), str):
            return row
        folder = file.parent.relative_to(self.base)
        return {**row, "audio": {"bytes": None, "path": (folder / row["file_name"]).as_posix()}}

    def _prepare(self, raw: list[tuple[str, int, dict[str, Any]]]) -> None:
        """What needs every row before one item is made (a classification's label sets); nothing here."""

    def _fields(self, where: str, index: int, row: Mapping[str, Any]) -> tuple[str, dict[str, Any], str, str]:
        """(place, {field: value}, task, id) of one row, its mapped columns checked (one line naming them)."""
        place = f"{where}: row {index}"
        get = {f: column_value(row, f, c, where) for f, c in self.mapping.items()}
        task = str(get.get("task") or self.kind.name)  # a benchmark without a task column: one config
        ident = get.get("id", row.get("benchmark_clip_id", row.get("id")))
        return place, get, task, str(ident) if ident not in (None, "") else f"{task}-{index:05d}"

    def _hub_rows(self, dataset: str) -> list[tuple[str, int, dict[str, Any]]]:
        try:
            import datasets

            table = datasets.load_dataset(dataset, self.hub_config, split=self.split)
            table = table.cast_column(self.mapping["audio"], datasets.Audio(decode=False))
        except Exception as err:  # the Hub and datasets raise many types; one line either way
            raise ValueError(f"{dataset}: not a local folder or file, and not loadable from the Hub "
                             f"({type(err).__name__}: {' '.join(str(err).split())[:200]})") from None
        return [(dataset, i, r) for i, r in enumerate(table)]

    def _item(self, where: str, index: int, row: Mapping[str, Any]) -> dict[str, Any]:
        """One item's mapped fields (audio left undecoded), checked."""
        place, get, task, ident = self._fields(where, index, row)
        fields = {"benchmark_clip_id": ident, "audio": None, "task": task, "duration_sec": row.get("duration_sec"),
                  "source_clip_id": row.get("source_clip_id"),
                  **{f: get.get(f) for f in ("question", "options", "answer", "adversarial")}}
        checked = normalize_mcq_row(fields, task, place, kind=self.kind.name)
        groups = {k: None if v is None else str(v) for k, v in (get.get("groups") or {}).items()}
        return {**checked, "audio": get["audio"], "groups": groups or None, "_where": f"{place} ({ident})"}

    def config_names(self, names: Sequence[str] | None) -> list[str]:
        """The tasks asked for (None: every task, in first-seen order); "did you mean" for an unknown one."""
        if names is None:
            return list(self._by_task)
        for name in names:
            if name not in self._by_task:
                close = difflib.get_close_matches(name, list(self._by_task), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"{self.root}: no task {name!r}{hint} (tasks: {', '.join(self._by_task)})")
        return list(names)


    def units(self, config: str) -> list[SourceUnit]:
        return [SourceUnit(i["benchmark_clip_id"], 0.0 if i["duration_sec"] != i["duration_sec"] else i["duration_sec"],
                           (i["benchmark_clip_id"],)) for i in self._by_task.get(config, [])]

    def _audio(self, item: Mapping[str, Any]) -> Any:
        value, where = item["audio"], item["_where"]
        if isinstance(value, Mapping) and value.get("array") is not None:
            import numpy as np

            return {"array": np.asarray(value["array"], dtype=np.float32), "sampling_rate": int(value["sampling_rate"])}
        if isinstance(value, Mapping) and value.get("bytes"):
            return decode_audio(io.BytesIO(value["bytes"]), where)
        path = value.get("path") if isinstance(value, Mapping) else value
        if not isinstance(path, str) or not path:
            raise ValueError(f"{where}: audio has neither bytes, an array nor a path")
        return self._decode_file(safe_join(self.base, path, where=where, hint=""), where)

    def _decode_file(self, file: Path, where: str) -> Any:
        """A local audio file's samples (soundfile)."""
        return decode_audio(file, where)

    def rows(self, config: str, units: Sequence[SourceUnit]) -> Iterator[dict[str, Any]]:
        wanted = {cid for u in units for cid in u.clip_ids}
        for item in self._by_task.get(config, []):
            if item["benchmark_clip_id"] in wanted:
                row = {k: v for k, v in item.items() if k != "_where"}
                yield {**row, "category": config, "audio": self._audio(item)}
