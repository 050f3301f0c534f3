"""The paper suite as data: a run and a table added by YAML alone, and every mistake in a suite file
reported as one line naming the file, the entry and the field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.data import CONFIGS
from harness.paper import main as entry_point_main
from harness.paper.cli import main
from harness.paper.suite import DEFAULT_SUITE, SuiteError, default_suite, read_suite

MINE = """\
include: default
runs:
  - name: paraphrase-1-audio_first
    prompt: paraphrase-1+audio_first
    configs: [volume]
    group: mine
tables:
  - key: A1
    filename: tableA1_paraphrase_audio_first.md
    title: Paraphrase 1, audio first
    kind: accuracy
    runs: [paraphrase-1-audio_first]
"""
RUN = "paraphrase-1-audio_first"


def _suite_file(tmp_path: Path, text: str, name: str = "my_suite.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_run_and_a_table_added_by_yaml_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _suite_file(tmp_path, MINE)
    suite = read_suite(path)
    paper = default_suite()
    assert [r.name for r in suite.runs] == [*(r.name for r in paper.runs), RUN]
    assert [t.key for t in suite.tables] == [*(t.key for t in paper.tables), "A1"]
    assert suite.by_name[RUN].tables == ("A1",) and suite.by_name[RUN].group == "mine"

    out = tmp_path / "dry"
    assert main(["--model", "always-increase", "--out", str(out), "--suite", str(path), "--only", "mine", "--dry-run"]) == 0
    record = json.loads((out / "suite.json").read_text())
    assert record["suite"] == str(path) and [r["run"] for r in record["runs"]] == [RUN]
    assert record["runs"][0]["configs"] == {"volume": 2400} and record["runs"][0]["tables"] == ["A1"]
    dry = (out / "tables" / "tableA1_paraphrase_audio_first.md").read_text()
    assert dry.startswith("# Table A1: Paraphrase 1, audio first\n") and "Dry run" in dry
    assert "| **always-increase (this run)** | — | — |" in dry  # no published values for a run of one's own
    assert "| A1 | [tableA1_paraphrase_audio_first.md](tableA1_paraphrase_audio_first.md) | dry run |" in (
        out / "tables" / "README.md").read_text()

    out = tmp_path / "run"
    args = ["--model", "random", "--out", str(out), "--suite", str(path), "--source", "demo",
            "--limit", "6", "--only", "mine", "--batch-size", "4"]
    assert entry_point_main(args) == 1  # harness.paper:main still works; the paper's own tables stay incomplete
    assert "table A1" not in capsys.readouterr().err
    rows = [json.loads(line) for line in (out / "runs" / RUN / "samples_volume.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and {r["prompt_variant"] for r in rows} == {"paraphrase-1+audio_first"}
    # the volume paraphrase 1 asks "rise or fall"; random answers one of the two words, seeded per clip
    label = {"rise": "increase", "fall": "decrease"}
    right = sum(label[r["raw"]] == r["gold"] for r in rows)
    assert 0 < right < len(rows)  # a mix of right and wrong answers (the seeded draw)
    accuracy = 100 * right / len(rows)
    table = (out / "tables" / "tableA1_paraphrase_audio_first.md").read_text()
    assert "INCOMPLETE" not in table and "Dry run" not in table
    assert f"| model | avg | volume |\n|---|---|---|\n| **random (this run)** | {accuracy:.1f} | {accuracy:.1f} |" in table


def test_the_shipped_suite_is_the_papers() -> None:
    suite = default_suite()
    assert suite.path == str(DEFAULT_SUITE) and len(suite.runs) == 36 and len(suite.tables) == 19
    assert suite.groups == ("main", "prompt-variants", "paraphrase", "few-shot", "beep", "sources", "formats",
                            "source-bias", "cross-attribute", "meld", "finetune")
    # Table 22 (MELD) and the adapters' runs of Table 4 / Figure 4: external runs (made by `harness eval`)
    assert [r.name for r in suite.runs if r.external] == ["meld-base", "meld-volume", "meld-pitch",
                                                          *(f"finetune:{c}" for c in CONFIGS)]
    assert [r.trained for r in suite.runs if r.group == "finetune"] == list(CONFIGS)
    t22 = next(t for t in suite.tables if t.key == "22")
    assert t22.kind == "meld-transfer" and t22.runs == ("meld-base", "meld-volume", "meld-pitch")
    fig8 = next(t for t in suite.tables if t.key == "figure8")
    assert fig8.head == "Figure 8" and fig8.runs == tuple(f"cross-attribute:{c}" for c in suite.by_name["main"].configs)
    assert suite.by_name["yesno"].configs[0] == "speed-yesno" and suite.by_name["beep"].source == "beep"
    assert suite.by_name["main"].tables == ("2", "4", "5", "6", "7", "8", "9", "10", "11", "13", "15", "figure4")


RUN_ENTRY = "  - {name: p, prompt: paraphrase-1, configs: [volume], group: mine}\n"
TABLE_ENTRY = "  - {key: A1, filename: a1.md, title: A1, kind: accuracy, runs: [p]}\n"
# (suite file text, the error after "<file>: ")
MISTAKES = {
    "unknown kind": ("runs:\n" + RUN_ENTRY + "tables:\n" + TABLE_ENTRY.replace("accuracy", "acuracy"),
                     "table 'A1': kind: unknown table kind 'acuracy'; did you mean 'accuracy'? (kinds: published-table2, "),
    "trained outside the configs": ("runs:\n" + RUN_ENTRY.replace("group: mine", "group: mine, trained: pitch"),
                                    "run 'p': trained: 'pitch' is not one of the run's configs"),
    "adapters' table without a base run": (
        "runs:\n" + RUN_ENTRY.replace("group: mine", "group: mine, trained: volume")
        + RUN_ENTRY.replace("name: p,", "name: q,").replace("group: mine", "group: mine, trained: volume")
        + "tables:\n" + TABLE_ENTRY.replace("kind: accuracy, runs: [p]", "kind: finetune-in-domain, runs: [p, q]"),
        "table 'A1': runs: run 'p' must be the base model's run (no trained: field)"),
    "unknown prompt": ("runs:\n" + RUN_ENTRY.replace("paraphrase-1", "parafrase-1"),
                       "run 'p': prompt: unknown prompt variant 'parafrase-1'; did you mean 'paraphrase-1'?"),
    "unknown config": ("runs:\n" + RUN_ENTRY.replace("[volume]", "[volum]"),
                       "run 'p': configs: unknown config 'volum'; did you mean 'volume' or 'beep-volume'?"),
    "duplicate run": ("include: default\nruns:\n" + RUN_ENTRY.replace("name: p", "name: main"),
                      f"run 'main': name: duplicate run name (first in {DEFAULT_SUITE}, runs[0])"),
    "same directory": ("runs:\n" + RUN_ENTRY.replace("name: p", "name: 'a:b'") + RUN_ENTRY.replace("name: p", "name: a-b"),
                       "run 'a-b': name: the directory of run 'a:b' (first in <FILE>, runs[0])"),
    "table reads no such run": ("include: default\ntables:\n" + TABLE_ENTRY.replace("[p]", "[paraphrse-1]"),
                                "table 'A1': runs: no run or group 'paraphrse-1' in the suite; did you mean 'paraphrase-1'?"),
    "unknown field": ("runs:\n" + RUN_ENTRY.replace("configs:", "config:"),
                      "run 'p': config: unknown field; did you mean 'configs'? (fields: name, prompt, configs, "),
    "prompt fixes no format": ("runs:\n  - {name: f, prompt: audio_ref, configs: '{category}-yesno'}\n",
                               "run 'f': prompt: config 'speed-yesno' fixes its question (SPEC §4): use prompt default "
                               "or audio_first, not 'audio_ref'"),
    "paraphrase of a config without one": ("runs:\n" + RUN_ENTRY.replace("[volume]", "[echo]"),
                                           "run 'p': prompt: paraphrase prompts exist only for volume, pitch, speed"),
    "bound source": ("runs:\n  - {name: b, prompt: default, configs: [beep-pitch]}\n",
                     "run 'b': source: config 'beep-pitch' is generated from the beep source only: give source: beep"),
    "unknown source": ("runs:\n" + RUN_ENTRY.replace("group: mine", "source: vtck"),
                       "run 'p': source: unknown source 'vtck'; did you mean 'vctk'?"),
    "few-shot clips": ("runs:\n  - {name: f, prompt: few-shot, configs: [volume], audios_per_query: 1}\n",
                       "run 'f': audios_per_query: prompt 'few-shot' puts 5 clip(s) in one query, not 1"),
    "name is another run's group": ("runs:\n" + RUN_ENTRY + RUN_ENTRY.replace("name: p", "name: mine"),
                                    "run 'mine': name: 'mine' is also the group of 'p'"),
    "kind reads one run": ("runs:\n" + RUN_ENTRY + RUN_ENTRY.replace("name: p", "name: q") + "tables:\n"
                           + TABLE_ENTRY.replace("[p]", "[p, q]"),
                           "table 'A1': runs: kind 'accuracy' reads exactly one run, got 2"),
    "kind needs format runs": ("runs:\n" + RUN_ENTRY + "tables:\n" + TABLE_ENTRY.replace("accuracy", "macro-f1"),
                               "table 'A1': runs: run 'p' must be of one format (yesno or ternary), got ['direction']"),
    "label of a run not read": ("runs:\n" + RUN_ENTRY + "tables:\n" + TABLE_ENTRY.replace("}", ", labels: {q: Q}}"),
                                "table 'A1': labels: 'q' is not a run this table reads"),
    "duplicate key": ("runs:\n" + RUN_ENTRY + "tables:\n" + TABLE_ENTRY + TABLE_ENTRY.replace("a1.md", "a2.md"),
                      "table 'A1': key: duplicate table key 'A1'"),
    "duplicate file": ("runs:\n" + RUN_ENTRY + "tables:\n" + TABLE_ENTRY + TABLE_ENTRY.replace("key: A1", "key: A2"),
                       "table 'A2': filename: 'a1.md' is also the file of table 'A1'"),
    "file in a folder": ("runs:\n" + RUN_ENTRY + "tables:\n" + TABLE_ENTRY.replace("a1.md", "../a1.md"),
                         "table 'A1': filename: '../a1.md': expected a file name ending .md"),
    "unnamed run": ("runs:\n  - {prompt: default, configs: [volume]}\n", "runs[0]: name: missing"),
    "not yaml": ("runs:\n  - {name: p\n", "not valid YAML: "),
    "not a mapping": ("- main\n", "expected a mapping of suite file fields, got list"),
    "unknown top field": ("run:\n" + RUN_ENTRY, "run: unknown field; did you mean 'runs'?"),
    "includes itself": ("include: my_suite.yaml\n", "include: 'my_suite.yaml' includes itself"),
}


@pytest.mark.parametrize("case", list(MISTAKES))
def test_a_mistake_is_one_line_naming_file_entry_and_field(tmp_path: Path, case: str) -> None:
    text, expected = MISTAKES[case]
    path = _suite_file(tmp_path, text)
    expected = f"{path}: " + expected.replace("<FILE>", str(path))
    with pytest.raises(SuiteError) as err:
        read_suite(path)
    message = str(err.value)
    assert message.startswith(expected) and "\n" not in message, message


def test_the_command_refuses_a_bad_suite_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _suite_file(tmp_path, MINE.replace("kind: accuracy", "kind: acuracy"))
    assert main(["--model", "always-increase", "--out", str(tmp_path / "out"), "--suite", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()
    assert re.fullmatch(rf"vocalgrad-paper: error: {re.escape(str(path))}: table 'A1': kind: unknown table kind "
                        r"'acuracy'; did you mean 'accuracy'\? \(kinds: .*\)\n", err)
    assert main(["--model", "m", "--out", str(tmp_path / "out"), "--suite", str(tmp_path / "none.yaml"), "--dry-run"]) == 2
    assert "none.yaml: cannot read the suite file" in capsys.readouterr().err


def test_yaml_is_read_safely(tmp_path: Path) -> None:
    path = _suite_file(tmp_path, "runs: !!python/object/apply:os.system ['echo unsafe']\n")
    with pytest.raises(SuiteError, match="not valid YAML"):
        read_suite(path)


def test_the_docs_and_docstring_examples_are_valid_suites(tmp_path: Path) -> None:
    import harness.paper

    readme = (Path(__file__).parents[1] / "docs" / "paper-suite.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(# my_suite\.yaml\n.*?)```", readme, re.S)
    doc = re.search(r"\n( +# my_suite\.yaml\n.*?)\n\n", harness.paper.__doc__ or "", re.S)
    assert block and doc
    texts = [block.group(1), "\n".join(line[4:] for line in doc.group(1).splitlines())]
    for i, text in enumerate(texts):
        suite = read_suite(_suite_file(tmp_path, text, f"example{i}.yaml"))
        assert suite.tables[-1].kind == "accuracy" and suite.tables[-1].runs == (RUN,)
