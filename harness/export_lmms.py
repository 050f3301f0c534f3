"""`harness export lmms-eval --configs ... --out DIR`: an lmms-eval task folder (`lmms-eval --include_path DIR`).

The folder holds a group YAML (`vocalgrad`, the unweighted mean over its configs, as our headline mean), one task
YAML per config (`vocalgrad_<config>`, lmms-eval's audio-task layout: `doc_to_visual` gives the clip,
`doc_to_text` our question), `utils.py` and `vocalgrad_parsing.py`, a verbatim copy of harness/parsing.py, so
answers are read by our parser (an unparsed answer is wrong, never a guessed letter) without installing this
package beside lmms-eval. The rows come from a VocalGrad build: a local `vocalgrad-dataset build` folder
(read as Parquet) or the Hub release (`--dataset ORG/NAME`, config = our config name).

Configs whose question and answers are per config (direction, yes/no, ternary, conflict) are exported; row-level
kinds (MCQ, classification) are refused by name. lmms-eval runs one generation per clip at the first budget
(no retry at 256 tokens) and places the audio where its model wrapper does: not the paper's protocol.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.kinds import task_kind
from harness.parsing import PARSER_VERSION
from harness.prompts import get_variant
from harness.results import task_version
from vocalgrad_dataset.fileio import atomic_write_text, safe_join

HUB_DATASET = "ynklab/vocalgrad"
GROUP = "vocalgrad"
PARSING_MODULE = "vocalgrad_parsing.py"


def task_name(config: str) -> str:
    """The lmms-eval task of a config: vocalgrad_<config> (YAML-safe, lmms-eval's naming)."""
    return f"{GROUP}_{config.replace('-', '_')}"


def _yaml_str(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string escapes are YAML's)."""
    return json.dumps(text, ensure_ascii=False)


def config_facts(config: str, prompt: str = "default") -> dict[str, Any]:
    """What a task YAML needs of a config: its question, parser id and answer labels; ValueError for a
    row-level kind (its question comes with each row)."""
    kind = task_kind(config)
    if kind.per_row:
        raise ValueError(f"config {config!r} ({kind.name}) asks per row; only configs with one question per config "
                         "are exported to lmms-eval")
    variant = get_variant(prompt)
    if variant.base == "few-shot":
        raise ValueError("few-shot prompt variants interleave example clips, which lmms-eval's one-audio tasks "
                         "cannot hold; export another --prompt")
    vocab = variant.vocabulary(config)
    from vocalgrad_dataset.tasks import config_spec

    # a build stores `label` as a ClassLabel: its index into these names (what lmms-eval's datasets gives)
    return {"question": variant.text(config), "parser": vocab.parser.id, "labels": list(config_spec(config).labels)}


def dataset_lines(config: str, dataset: str, split: str) -> list[str]:
    """The YAML lines that name a config's rows: a local build's Parquet shards, else the Hub release."""
    local = Path(dataset).expanduser()
    if local.is_dir():
        shards = safe_join(local.resolve(), config, where="--configs")
        if not any(shards.glob(f"{split}-*.parquet")):
            raise FileNotFoundError(f"{local}: no {split} shards of config {config!r} ({config}/{split}-*.parquet)")
        return ["dataset_path: parquet", "dataset_kwargs:", "  data_files:",
                f"    {split}: {_yaml_str(str(shards / f'{split}-*.parquet'))}"]
    return [f"dataset_path: {_yaml_str(dataset)}", f"dataset_name: {_yaml_str(config)}"]


def task_yaml(config: str, facts: dict[str, Any], dataset: str, split: str, max_new_tokens: int) -> str:
    """One config's task YAML."""
    fn = task_name(config)
    lines = [
        f"# written by `harness export lmms-eval`; {config}: parser {facts['parser']}",
        f"task: {fn}",
        *dataset_lines(config, dataset, split),
        f"test_split: {split}",
        "output_type: generate_until",
        "doc_to_visual: !function utils.doc_to_audio",
        "doc_to_text: !function utils.doc_to_text",
        "doc_to_target: label",
        "generation_kwargs:",
        f"  max_new_tokens: {max_new_tokens}",
        "  temperature: 0",
        "  do_sample: false",
        "lmms_eval_specific_kwargs:",
        "  default:",
        f"    pre_prompt: {_yaml_str(facts['question'])}",
        '    post_prompt: ""',
        f"process_results: !function utils.process_results_{fn}",
        "metric_list:",
        "  - metric: accuracy",
        "    aggregation: !function utils.accuracy",
        "    higher_is_better: true",
        "  - metric: parsed",
        "    aggregation: !function utils.share_parsed",
        "    higher_is_better: true",
        "metadata:",
        f"  version: {_yaml_str(task_version())}",
        f"  parser: {_yaml_str(facts['parser'])}",
    ]
    return "\n".join(lines) + "\n"


def group_yaml(configs: Sequence[str]) -> str:
    """The group: every task, accuracy as the unweighted mean over them (our headline mean)."""
    tasks = "".join(f"  - {task_name(c)}\n" for c in configs)
    return (f"# written by `harness export lmms-eval`\ngroup: {GROUP}\ntask:\n{tasks}aggregate_metric_list:\n"
            "  - metric: accuracy\n    aggregation: mean\n    weight_by_size: false\n"
            f"metadata:\n  version: {_yaml_str(task_version())}\n")


UTILS_HEAD = '''"""VocalGrad tasks for lmms-eval, written by `harness export lmms-eval`; do not edit.

Our question (doc_to_text), the clip (doc_to_visual), our parser from vocalgrad_parsing.py beside this file
(an unparsed answer counts as wrong) and accuracy = correct / all, as `harness report` computes it.
"""

import importlib.util
import io
import os
import sys

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))


def _parsing():
    """vocalgrad_parsing.py of this folder, loaded once."""
    name = "vocalgrad_parsing"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(_HERE, "vocalgrad_parsing.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _mono(x, rate):
    x = np.asarray(x, dtype=np.float32)
    return {"array": x.mean(axis=0) if x.ndim > 1 else x, "sampling_rate": int(rate)}


def doc_to_audio(doc):
    """The clip as lmms-eval's audio models take it: [{"array", "sampling_rate"}]."""
    audio = doc["audio"]
    if isinstance(audio, dict) and audio.get("array") is not None:
        return [_mono(audio["array"], audio["sampling_rate"])]
    if hasattr(audio, "get_all_samples"):  # datasets >= 4 decodes Audio with torchcodec
        samples = audio.get_all_samples()
        return [_mono(samples.data.numpy(), samples.sample_rate)]
    if isinstance(audio, dict) and audio.get("bytes"):
        import soundfile as sf

        x, rate = sf.read(io.BytesIO(audio["bytes"]), dtype="float32", always_2d=True)
        return [_mono(x.T, rate)]
    raise ValueError(f"clip {doc.get('benchmark_clip_id')}: its audio is neither decoded nor bytes")


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    """Our question for the clip's config (the task YAML's pre_prompt)."""
    kwargs = lmms_eval_specific_kwargs or {}
    return kwargs.get("pre_prompt", "") + kwargs.get("post_prompt", "")


def score(doc, results, parser_id, label_names):
    """One clip: parsed by our parser, correct when the parsed label is the clip's label (a build's ClassLabel
    index is read through the config's label names)."""
    answer = results[0] if results else None
    pred = _parsing().get_parser(parser_id).parse(answer) if isinstance(answer, str) else None
    gold = label_names[doc["label"]] if isinstance(doc["label"], int) else doc["label"]
    item = {"clip": doc.get("benchmark_clip_id"), "correct": pred is not None and pred == gold,
            "parsed": pred is not None}
    return {"accuracy": item, "parsed": item}


def accuracy(items):
    """Correct answers over all clips (unparsed and failed ones are wrong)."""
    return sum(bool(i["correct"]) for i in items) / len(items) if items else None


def share_parsed(items):
    """Parsed answers over all clips."""
    return sum(bool(i["parsed"]) for i in items) / len(items) if items else None
'''


def utils_py(tasks: dict[str, dict[str, Any]]) -> str:
    """utils.py: the shared functions, then one process_results per task (its parser and label names fixed)."""
    defs = "".join(f"\n\ndef process_results_{fn}(doc, results):\n"
                   f"    return score(doc, results, {f['parser']!r}, {tuple(f['labels'])!r})\n"
                   for fn, f in tasks.items())
    return UTILS_HEAD + defs


def export_lmms_eval(configs: Sequence[str], out: str | Path, *, dataset: str = HUB_DATASET, split: str = "test",
                     prompt: str = "default", max_new_tokens: int = 128) -> list[Path]:
    """Write the task folder (module docstring); returns the files written."""
    from vocalgrad_dataset.tasks import resolve

    names = list(dict.fromkeys(resolve(c) for c in configs))
    facts = {c: config_facts(c, prompt) for c in names}
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {f"{GROUP}.yaml": group_yaml(names)}
    files.update({f"{task_name(c)}.yaml": task_yaml(c, facts[c], dataset, split, max_new_tokens) for c in names})
    files["utils.py"] = utils_py({task_name(c): facts[c] for c in names})
    files[PARSING_MODULE] = (f"# harness/parsing.py of VocalGrad (parser version {PARSER_VERSION}), copied by "
                             "`harness export lmms-eval`; do not edit.\n" + Path(__file__).with_name("parsing.py")
                             .read_text(encoding="utf-8"))
    written = []
    for name, text in files.items():
        atomic_write_text(out_dir / name, text)
        written.append(out_dir / name)
    return written


def _run(ns: Any) -> int:
    written = export_lmms_eval(ns.configs, ns.out, dataset=ns.dataset, split=ns.split, prompt=ns.prompt,
                               max_new_tokens=ns.max_new_tokens)
    print(f"wrote {len(written)} files to {ns.out}: lmms-eval --include_path {ns.out} --tasks {GROUP}")
    return 0


def add_export_parser(command: Any) -> None:
    """Register `harness export lmms-eval` with the harness's subcommand maker."""
    from harness.settings import configs_type
    from vocalgrad_dataset.cli.argtypes import positive_int
    from vocalgrad_dataset.cli.info import subcommands

    ex = command("export", "write VocalGrad as another harness's task folder",
                 "Write VocalGrad configs as a task folder another evaluation harness runs.")
    sub = subcommands(ex, dest="export_command")
    e = sub("lmms-eval", "an lmms-eval task folder (--include_path DIR)",
            "Write a group YAML, one task YAML per config, utils.py and our parser, so that `lmms-eval "
            "--include_path DIR --tasks vocalgrad_<config>` (or the group `vocalgrad`) runs them with our prompt "
            "and parser (unparsed = wrong). lmms-eval asks once at the first budget (no retry) and places the "
            "audio as its model wrapper does: not the paper's protocol.", run=_run)
    e.add_argument("--configs", "--tasks", dest="configs", type=configs_type, required=True,
                   help="comma-separated configs, e.g. pitch,volume (direction, yes/no, ternary or conflict kinds)")
    e.add_argument("--out", required=True, help="the task folder to write (created)")
    e.add_argument("--dataset", default=HUB_DATASET,
                   help="a local `vocalgrad-dataset build` folder, or a Hub dataset id (default: %(default)s)")
    e.add_argument("--split", default="test", help="(default: %(default)s)")
    e.add_argument("--prompt", default="default", help="prompt variant whose question is asked (default: %(default)s)")
    e.add_argument("--max-new-tokens", type=positive_int, default=128, help="(default: %(default)s)")
