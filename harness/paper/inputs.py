"""The samples a table reads: one suite run's samples files, checked against its prompt variant and model.

SPEC §8: a table never reads another prompt variant's files. A run directory whose rows carry another
prompt variant or model is an error (the table is written INCOMPLETE with that reason), and a missing
samples file is recorded as missing; nothing is substituted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.metrics import summarize
from harness.paper.declared import SuiteRun
from harness.prompts import get_variant
from harness.report import load_samples
from harness.results import samples_name

Rows = list[dict[str, Any]]


class SuiteInputs:
    """Samples of the suite's runs, loaded on demand, checked against the run's prompt variant and model."""

    def __init__(self, out_dir: Path, model: str, runs: Mapping[str, SuiteRun], *, dry_run: bool = False) -> None:
        self.out_dir, self.model, self.dry_run = out_dir, model, dry_run
        self.runs = dict(runs)
        self._loaded: dict[str, dict[str, Rows]] = {}
        self._summaries: dict[tuple[str, str], dict[str, Any]] = {}
        self.missing: list[str] = []  # samples files a table asked for and did not find, in order

    def _run_rows(self, name: str) -> dict[str, Rows]:
        if name not in self._loaded:
            run = self.runs[name]
            run_dir = self.out_dir / "runs" / run.dirname
            try:
                rows = load_samples(run_dir)
            except FileNotFoundError:
                rows = {}
            want = get_variant(run.prompt).name
            for config, rs in rows.items():
                variants = {r.get("prompt_variant") for r in rs}
                models = {r.get("model") for r in rs}
                if variants != {want} or models != {self.model}:
                    # SPEC §8: never read another variant's (or model's) answers into this table
                    raise ValueError(f"{run_dir / samples_name(config)} holds prompt {sorted(map(str, variants))} of model "
                                     f"{sorted(map(str, models))}; run {name!r} needs prompt {want!r} of {self.model!r}")
            self._loaded[name] = rows
        return self._loaded[name]

    def has_samples(self, run: str) -> bool:
        """True when the run's directory holds any samples file (whatever its prompt or model)."""
        return any((self.out_dir / "runs" / self.runs[run].dirname).glob("samples_*.jsonl"))

    def _results(self, run: str) -> dict[str, Any]:
        """The run's results.json ({} when absent or unreadable: the table says what is missing)."""
        import json

        path = self.out_dir / "runs" / self.runs[run].dirname / "results.json"
        try:
            results = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return results if isinstance(results, dict) else {}

    def run_caveats(self, run: str) -> list[str]:
        """Why a run's numbers are not the paper's table: a --limit sample (harness report's LIMITED RUN line)
        or rows from a source other than the benchmark's (the demo clips, another corpus); [] otherwise."""
        from harness.report import limit_note

        results = self._results(run)
        if not results:
            return []
        notes = [note] if results.get("n-samples") and (note := limit_note(results)) else []
        source = str((results.get("config") or {}).get("source", ""))
        if off := off_source(source, self.runs[run].source):
            notes.append(off)
        return notes

    def not_paper_protocol(self, run: str) -> list[str]:
        """The opt-ins a run used that are not the paper's protocol (results.json model_info
        "not_paper_protocol": dtype, TF32, attention implementation); [] for the paper's protocol or no run."""
        import json

        path = self.out_dir / "runs" / self.runs[run].dirname / "results.json"
        try:
            info = json.loads(path.read_text(encoding="utf-8")).get("model_info") or {}
        except (OSError, ValueError):
            return []
        return [str(x) for x in info.get("not_paper_protocol") or []]

    def rows(self, run: str, config: str) -> Rows | None:
        """A config's samples rows of a run (re-parsed), or None when absent (recorded as missing)."""
        if self.dry_run:
            return None
        rows = self._run_rows(run).get(config)
        if rows is None:
            self.missing.append(f"runs/{self.runs[run].dirname}/{samples_name(config)}")
        return rows

    def summary(self, run: str, config: str) -> dict[str, Any] | None:
        """metrics.summarize of a config of a run, or None."""
        key = (run, config)
        if key not in self._summaries:
            rows = self.rows(run, config)
            if rows is None:
                return None
            self._summaries[key] = summarize(rows)
        return self._summaries[key]

    def metric(self, run: str, config: str, key: str) -> float | None:
        """One summarize() value of a config of a run, or None."""
        s = self.summary(run, config)
        return None if s is None else s[key]


def missing_text(missing: Sequence[str]) -> str:
    """"missing samples: runs/a (9 configs), runs/b/samples_x.jsonl" from the missing file paths."""
    by_dir: dict[str, list[str]] = {}
    for path in missing:
        folder, _, name = path.rpartition("/")
        by_dir.setdefault(folder, []).append(name)
    parts = [f"{d}/{n[0]}" if len(n) == 1 else f"{d} ({len(n)} configs)" for d, n in by_dir.items()]
    return "missing samples: " + ", ".join(parts)


OFFICIAL_SOURCE = "vctk"  # the benchmark's clips (generated, built or released); demo clips are a smoke test


def off_source(source: str, declared: str | None) -> str | None:
    """"not the benchmark's source" when a run's rows came from the demo clips, or from a corpus other than the
    one its suite run declares; None for the benchmark's own (generated VCTK, a build, a release, items)."""
    generated = [part.partition(":")[2] for part in source.split(",") if part.startswith("generate:")]
    if "demo" in generated:
        return f"source {source}: the demo clips, not the benchmark's {declared or OFFICIAL_SOURCE} clips (a smoke test)"
    if declared is not None and generated and declared not in generated:
        return f"source {source}, not the {declared} clips this run declares"
    return None
