"""`vocalgrad-paper`: the paper's appendix suite for one model, declared as data.

The suite is a YAML file, harness/paper/suite.yaml: its `runs:` (each a prompt variant over some configs,
an ordinary resumable harness run under DIR/runs/) and its `tables:` (each a Markdown file under
DIR/tables/ of one kind, reading named runs, with the published values beside ours wherever
harness/data/camera_ready_direction_metrics.csv has them). As in lm-evaluation-harness's task YAML, a
researcher adds a run, or a table of an existing kind, by writing YAML only:

    # my_suite.yaml
    include: default                 # the paper's runs and tables, then these
    runs:
      - name: paraphrase-1-audio_first
        prompt: paraphrase-1+audio_first
        configs: [volume]            # or a pattern over the nine categories: "{category}", "{category}-yesno"
        group: mine                  # --only mine runs just this
    tables:
      - key: A1
        filename: tableA1_paraphrase_audio_first.md
        title: Paraphrase 1, audio first
        kind: accuracy               # accuracy per config, published models beside where they exist
        runs: [paraphrase-1-audio_first]

    vocalgrad-paper --model NAME --out DIR --suite my_suite.yaml --only mine [--dry-run]

The loader (suite.py) checks every field and reports a mistake as one line naming the file, the entry
and the field (unknown prompt variant, config, source or table kind with "did you mean", duplicate
names, a table reading a run that does not exist). The modules:

- suite.py: SuiteRun / SuiteTable / Suite and reading a declaration (PyYAML safe_load only);
- tables.py: the table kinds (builders registered by name; a new kind is Python, a new table is YAML);
- reference.py: the published values, indexed by run name;
- inputs.py: SuiteInputs, a run's samples checked against its prompt variant and model;
- run.py: SuiteSettings, the plan, running the suite, writing the tables;
- cli.py: the command line.

SPEC §8: a table never reads another prompt variant's files. A run directory whose rows carry another
prompt variant or model is an error, and a missing samples file leaves its cells marked missing and the
table INCOMPLETE (the command exits non-zero); nothing is substituted.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """`vocalgrad-paper` (harness.paper.cli.main; kept here for `harness.paper:main` entry points)."""
    from harness.paper.cli import main as cli_main

    return cli_main(argv)
