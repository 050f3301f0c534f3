"""Every command in the shell blocks of README.md and of the docs pages (docs/*.md, where the README's commands
moved) is checked, so the docs cannot drift from the command lines.

Each ```bash / ```sh / ```console block (and an untagged block that starts with `$ ` or one of our commands) is
split into commands: continuation lines joined, comments dropped, parsed with shlex. Then
- every invocation of our own entry points (the console scripts of pyproject.toml, `python -m <module>`,
  `python <file>.py`, `accelerate launch ... <file>.py`, `bash scripts/<file>.sh`, also inside `bash -c '...'`)
  is parsed by that command's real argparse parser, and the file or module it names must exist;
- the cheap, offline commands in RUN are run end to end in a temporary folder;
- everything else is in SKIP with the reason it cannot run here (network, GPU, VCTK, minutes or hours).
A README command that is in neither RUN nor SKIP fails the test, and so does a RUN/SKIP entry the README no
longer has: a new README command cannot slip through unchecked.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
# README.md keeps the two newcomer commands; every other command moved to the docs site's pages
DOC_FILES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
TEXTS = {name: (ROOT / name).read_text(encoding="utf-8") for name in DOC_FILES}
README = "\n".join(TEXTS.values())
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
# console script -> "module:function": pyproject.toml's [project.scripts] (no tomllib on Python 3.10)
_SCRIPTS_TABLE = re.search(r"^\[project\.scripts\]\n(.*?)(?:^\[|\Z)", (ROOT / "pyproject.toml").read_text(), re.S | re.M)
assert _SCRIPTS_TABLE, "pyproject.toml has no [project.scripts]"
CONSOLE_SCRIPTS = dict(re.findall(r'^([\w-]+) = "([\w.:]+)"$', _SCRIPTS_TABLE.group(1), re.M))
PROGRAMS = {*CONSOLE_SCRIPTS, "python", "accelerate", "bash"}
# the README's metavars that stand for a value of a typed option (`[--num-proc N]`)
PLACEHOLDER_VALUES = {"N": "2"}


@dataclass(frozen=True)
class Command:
    """One README command: where it starts, and its words after shlex (comments dropped)."""

    line: int
    argv: tuple[str, ...]
    file: str = "README.md"

    @property
    def key(self) -> str:
        """The command normalised to one line (what RUN and SKIP name)."""
        return shlex.join(self.argv)


def _is_command_block(language: str, body: str) -> bool:
    """A shell block, or an untagged one whose first line is a prompt or one of our programs (not a tree)."""
    if language in SHELL_LANGUAGES:
        return True
    first = body.lstrip().split("\n", 1)[0]
    return language == "" and (first.startswith("$ ") or first.split(" ", 1)[0] in PROGRAMS)


def _logical_lines(body: str, first_line: int) -> Iterator[tuple[int, str]]:
    """(README line, text) of each command line; `\\` continuations joined; console output lines dropped."""
    console = body.lstrip().startswith("$ ")
    lines = body.split("\n")
    i = 0
    while i < len(lines):
        start, text = first_line + i, lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1].rstrip() + " " + lines[i].strip()
        i += 1
        if console:
            if not text.startswith("$ "):
                continue  # the command's printed output
            text = text[2:]
        yield start, text


def readme_commands() -> list[Command]:
    """Every command of every command block of README.md, in order."""
    commands = []
    for name, text_of_file in TEXTS.items():
        for found in re.finditer(r"^```(\w*)\n(.*?)^```", text_of_file, re.S | re.M):
            language, body = found.group(1), found.group(2)
            if not _is_command_block(language, body):
                continue
            first_line = text_of_file.count("\n", 0, found.start()) + 2  # the block's first line, 1-based
            for line, text in _logical_lines(body, first_line):
                argv = tuple(shlex.split(text, comments=True))
                if argv:
                    commands.append(Command(line, argv, name))
    return commands


# --- resolving a command to the entry point it runs ------------------------------------------------------------


@dataclass(frozen=True)
class Invocation:
    """Our entry point as a command reaches it: the module, and the arguments its parser sees."""

    module: str
    args: tuple[str, ...]
    path: str | None = None  # the file it runs, when run as a file (`python benchmarks/x.py`)


def _module_of_file(path: str) -> str:
    """`harness/eval.py` -> `harness.eval`; the file must be in the repository."""
    assert (ROOT / path).is_file(), f"{path} does not exist"
    return path.removesuffix(".py").replace("/", ".")


def _shell_expansions(text: str) -> str:
    """`$VAR`, `"$VAR"` and `$((...))` stand for a number here (the SLURM example's node counts and ranks)."""
    return re.sub(r"\$\(\(.*?\)\)|\$\{?\w+\}?", "2", text)


def _python_invocation(args: list[str]) -> Invocation | None:
    """`python -m module ...` or `python file.py ...`; None for `python -c CODE` (not an entry point)."""
    if args[0] == "-m":
        assert importlib.util.find_spec(args[1]) is not None, f"no module {args[1]}"
        return Invocation(args[1], tuple(args[2:]))
    if args[0] == "-c":
        return None
    return Invocation(_module_of_file(args[0]), tuple(args[1:]), args[0])


def _accelerate_invocation(args: list[str]) -> Invocation:
    """`accelerate launch OPTIONS file.py ARGS`: OPTIONS by accelerate's own parser, ARGS by ours."""
    from accelerate.commands.launch import launch_command_parser

    ns = launch_command_parser().parse_args(args)
    if ns.module:
        return Invocation(ns.training_script, tuple(ns.training_script_args))
    return Invocation(_module_of_file(ns.training_script), tuple(ns.training_script_args), ns.training_script)


def invocations(argv: tuple[str, ...]) -> list[Invocation]:
    """The invocations of our entry points in one command (none for a command of someone else's)."""
    words = [PLACEHOLDER_VALUES.get(w.strip("[]"), w.strip("[]")) for w in argv]  # `[--opt X]`: optional parts
    if "bash" in words and words[words.index("bash") + 1:][:1] == ["-c"]:  # `srun bash -c '...'`
        return invocations(tuple(shlex.split(_shell_expansions(words[words.index("bash") + 2]))))
    program, args = words[0], words[1:]
    if program in CONSOLE_SCRIPTS:
        return [Invocation(CONSOLE_SCRIPTS[program].split(":")[0], tuple(args))]
    if program == "python":
        found = _python_invocation(args)
        return [found] if found else []
    if program == "accelerate" and args[:1] == ["launch"]:
        return [_accelerate_invocation(args[1:])]
    if program == "bash" and args and args[0].endswith(".sh"):
        assert (ROOT / args[0]).is_file(), f"{args[0]} does not exist"  # takes no arguments: nothing to parse
    return []


class _Parsed(Exception):
    """Raised by the intercepted parse_args: the arguments were accepted, run nothing further."""


def _relax(parser: argparse.ArgumentParser) -> None:
    """A command with `...` elides arguments: its required options may be among them."""
    for action in parser._actions:
        if action.option_strings:
            action.required = False
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _relax(sub)


def _load(invocation: Invocation) -> ModuleType:
    """The module, imported as a package module (files outside a package, e.g. scripts/, by their path)."""
    if importlib.util.find_spec(invocation.module.split(".")[0]) is not None:
        return importlib.import_module(invocation.module)
    spec = importlib.util.spec_from_file_location(invocation.module, ROOT / str(invocation.path))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_arguments(invocation: Invocation, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parse the arguments with the entry point's real parser: its build_parser()/parser(), or else its main()
    stopped right after parse_args. argparse's error (SystemExit) propagates."""
    args = [a for a in invocation.args if a != "..."]
    elided = len(args) != len(invocation.args)
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self: argparse.ArgumentParser, argv: list[str] | None = None, namespace: object = None) -> None:
        if elided:
            _relax(self)
        original(self, argv, namespace)
        raise _Parsed

    module = _load(invocation)
    build = getattr(module, "build_parser", None) or getattr(module, "parser", None)
    if build is not None:
        parse_then_stop(build(), args)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.setattr(sys, "argv", [invocation.path or invocation.module, *args])
    module.main()  # e.g. harness/eval.py: prepends `eval` and hands over to the harness parser


# --- what is run, and what is skipped --------------------------------------------------------------------------

NETWORK = "needs the Hub (model weights or an upload)"
GPU_MODEL = "loads a 7B model (GPU, weights from the Hub)"
VCTK = "needs the VCTK corpus"


def _ids_2400(out: str, earlier: dict[str, str]) -> None:
    assert len(out.split()) == 2400  # README: "the 2,400 published clip ids"


def _sha256(out: str, earlier: dict[str, str]) -> None:
    assert re.fullmatch(r"[0-9a-f]{64}\n", out)


def _categories_table(out: str, earlier: dict[str, str]) -> None:
    assert out.strip() in README  # README: "the table below"


def _every_readme_model(out: str, earlier: dict[str, str]) -> None:
    registered = {line.split()[0] for line in out.splitlines() if line.strip()}
    named = {c.argv[c.argv.index("--model") + 1] for c in readme_commands()
             if "--model" in c.argv and c.argv[0] != "lmms-eval"}  # lmms-eval's --model names its own wrappers
    assert named <= registered, f"README names models list-models does not know: {sorted(named - registered)}"


def _listening_items(out: str, earlier: dict[str, str]) -> None:
    items = [json.loads(line) for line in out.splitlines()]
    assert len(items) == 48 and all({"tier", "curve", "direction"} <= set(i) for i in items)  # --n 48, README fields


def _built(out: str, earlier: dict[str, str]) -> None:
    assert json.loads(out.splitlines()[-1])["written_rows"] > 0


def _loaded(out: str, earlier: dict[str, str]) -> None:
    built = json.loads(earlier[BUILD].splitlines()[-1])["written_rows"]
    assert f"num_rows: {built}" in out  # datasets reads every row the build wrote


def _manifest(out: str, earlier: dict[str, str]) -> None:
    assert json.loads(out.splitlines()[-1])["clips"] == json.loads(earlier[BUILD].splitlines()[-1])["written_rows"]


def _identical(out: str, earlier: dict[str, str]) -> None:
    summary = json.loads(out.splitlines()[-1])
    assert summary["identical"] is True and summary["clips"] == summary["manifest_clips"] > 0


def _evaluated(out: str, earlier: dict[str, str]) -> None:
    assert "volume" in out  # the per-config table harness eval prints at the end


BUILD = "vocalgrad-dataset build --config volume-conflict --split test --out D"


# README command -> (placeholders bound for the run, check of its stdout); run in this order in one folder
RUN: dict[str, tuple[dict[str, str], Callable[[str, dict[str, str]], None]]] = {
    "vocalgrad-dataset ids --config pitch --split test": ({}, _ids_2400),
    "vocalgrad-dataset ids --config volume-conflict --split test --sha256": ({}, _sha256),
    "vocalgrad-dataset list --markdown": ({}, _categories_table),
    "harness list-models": ({}, _every_readme_model),
    "vocalgrad-listen sample --config volume --n 48 --seed 0": ({}, _listening_items),
    BUILD: ({}, _built),
    "python -c 'import datasets; print(datasets.load_dataset(\"D\", \"volume-conflict\", split=\"test\"))'":
        ({}, _loaded),
    "vocalgrad-dataset manifest DIR": ({"DIR": "D"}, _manifest),
    "vocalgrad-dataset verify DIR --manifest FILE": ({"DIR": "D", "FILE": "D/manifest.csv"}, _identical),
    "harness eval --model tiny-qwen2-audio --configs volume --source demo --limit 4 --data-workers 2 "
    "--out runs/tiny-pool --no-preflight": ({}, _evaluated),
}

# Kimi-Audio, MiMo-Audio and Step-Audio 2 runs: their runtimes and GPU checkpoints (not on PyPI); the
# tests/test_{kimi,mimo,step}_finetune.py files run the same commands against small fakes of the runtimes
RUNTIME_NEEDED = "needs the model's own runtime and checkpoint on a GPU (tests/test_*_finetune.py: fake runtimes)"
SKIP: dict[str, str] = {
    # docs/adding-a-kind.md: tests/test_plugin_kind.py installs the page's plugin and runs these four commands
    "harness eval --model random --configs volume-same3 --source demo --out runs/same3":
        "needs the page's plugin installed (tests/test_plugin_kind.py runs it)",
    "harness report runs/same3": "needs the plugin run above (tests/test_plugin_kind.py)",
    "harness leaderboard submit runs/same3 --model-name random --out subs/same3.json":
        "needs the plugin run above (tests/test_plugin_kind.py)",
    "vocalgrad-finetune --model tiny-qwen2-audio --category volume-same3 --source demo --scope all_linear "
    "--objective dpo --max-steps 2 --skip-eval --out runs/same3-dpo": "needs the page's plugin (tests/test_plugin_kind.py)",
    "lmms-eval --model qwen2_audio --include_path tasks/vocalgrad --tasks vocalgrad_pitch":
        "lmms-eval and a 7B model (tests/test_export_lmms.py loads the folder where lmms-eval is installed apart)",
    "vllm serve Qwen/Qwen2-Audio-7B-Instruct --max-model-len 4096 --limit-mm-per-prompt '{\"audio\": 5}'":
        "a vLLM server on a GPU",
    "harness eval --model openai-compatible --model-arg base_url=http://localhost:8000/v1,model=Qwen/Qwen2-Audio-7B-"
    "Instruct,concurrency=32 --configs all --batch-size 64 --out runs/qwen2-vllm":
        "needs the vLLM server above (tests/test_served_model.py runs a loopback one)",
    "for i in 0 1 2 '3;' do 'CUDA_VISIBLE_DEVICES=$i' vllm serve Qwen/Qwen2-Audio-7B-Instruct --port '$((8000+i))' '&' done":
        "four vLLM servers on GPUs",
    "harness eval --model openai-compatible --model-arg base_url=http://localhost:8000/v1,http://localhost:8001/v1,"
    "http://localhost:8002/v1,http://localhost:8003/v1 --model-arg model=Qwen/Qwen2-Audio-7B-Instruct,concurrency=64 "
    "--batch-size 256 --configs all --out runs/qwen2-vllm": "needs the four vLLM servers above",
    "bash scripts/demo.sh": "the whole demo, ~3 minutes (tests/test_harness_e2e.py covers its parts)",
    "bash scripts/test.sh": "the whole test suite",
    "vocalgrad-dataset build --config pitch --split test --source demo --out DIR '[--num-proc' 'N]' "
    "'[--push-to-hub' 'ORG/vocalgrad]'": "a full demo build; the volume-conflict build is run instead",
    "python -c 'import datasets; print(datasets.load_dataset(\"DIR\", \"pitch\", split=\"test\"))'":
        "loads the pitch build above; the same load runs on the volume-conflict build",
    "vocalgrad-dataset oracle --config all --split test --source demo": "~35 s on one core (tests/test_oracle.py)",
    "vocalgrad-dataset build --config all --split test --source vctk --data-dir .../VCTK-Corpus --out mine": VCTK,
    "vocalgrad-dataset manifest RELEASE_DIR --out published.csv": "needs the published release folder",
    "vocalgrad-dataset verify mine --manifest published.csv": "needs the VCTK build and the release manifest",
    "vocalgrad-dataset verify mine --manifest RELEASE_DIR": "needs the VCTK build and the release folder",
    "python benchmarks/bench_generator.py": "a benchmark, minutes of CPU",
    "python benchmarks/bench_pclm_dpo.py --out runs/bench-repairs": "a benchmark: eight trainings, minutes of CPU",
    "python benchmarks/bench_generator.py --repeats 3": "a benchmark: nine categories, three repeats, minutes of CPU",
    "python benchmarks/bench_generator.py --only pitch --repeats 5": "a benchmark: pitch, five repeats, minutes of CPU",
    "python benchmarks/bench_generator.py --skip-categories --build": "a benchmark: 12 demo builds, minutes of CPU",
    "python benchmarks/bench_generator.py --build": "a benchmark: nine categories and 12 demo builds, minutes of CPU",
    "python benchmarks/bench_generator.py --skip-categories --memory-build 5 --only volume,echo,vibration":
        "a benchmark: six builds of a 5-minute source, 3 GB of RAM",
    "python benchmarks/bench_generator.py --skip-categories --memory-build 20 --only volume":
        "a benchmark: two builds of a 20-minute source, 11 GB of RAM",
    "python benchmarks/bench_generator.py --skip-categories --memory 20": "a benchmark: 20-minute sources, GBs of RAM",
    "python benchmarks/bench_generator.py --skip-categories --memory 20 --only vibration --memory-conditions 3":
        "a benchmark: 3 GB of RAM",
    "accelerate launch --multi_gpu --num_processes 2 harness/eval.py --model signal-oracle --configs volume,noise "
    "--split test --source demo --out runs/oracle": "two GPUs (tests/test_multinode.py runs the CPU launch)",
    "harness eval --model tiny-qwen2-audio --configs pitch --source demo --mode choices --out runs/tiny":
        "a model evaluation, minutes on CPU (tests/test_harness_e2e.py)",
    "harness report runs/oracle runs/tiny": "needs the two runs above",
    "harness report runs/oracle runs/tiny --format latex": "needs the two runs above",
    "harness compare runs/a runs/b": "needs two runs",
    "accelerate launch --multi_gpu --num_machines 2 --machine_rank 0 --num_processes 16 --main_process_ip 10.0.0.1 "
    "--main_process_port 29500 harness/eval.py --model qwen2-audio-7b-instruct --configs all "
    "--dataset /shared/vocalgrad --out /shared/runs/qwen2": "two machines with 8 GPUs each",
    "'MAIN=$(scontrol' show hostnames '$SLURM_JOB_NODELIST' '|' head -n '1)'": "SLURM (a shell line, not ours)",
    "srun bash -c 'accelerate launch --multi_gpu --num_machines \"$SLURM_NNODES\" --machine_rank \"$SLURM_NODEID\" "
    "--num_processes $((SLURM_NNODES * 8)) --main_process_ip $MAIN --main_process_port 29500 harness/eval.py "
    "--model qwen2-audio-7b-instruct --configs all --dataset /shared/vocalgrad --out /shared/runs/qwen2'":
        "SLURM, two machines with 8 GPUs each",
    "python -m probing.extract --model whisper-tiny-en --configs volume --source demo --split train --out runs/probe":
        NETWORK,
    "python -m probing.extract --model whisper-tiny-en --configs volume --source demo --split test --out runs/probe":
        NETWORK,
    "python -m probing.train runs/probe": "needs the extraction above",
    "python -m probing.report runs/probe '[--harness' 'runs/eval]'": "needs the extraction above",
    "vocalgrad-finetune --model qwen2-audio-7b-instruct --category volume --scope all_linear --out runs/lora-volume "
    "'[--push-to-hub' 'ORG/qwen2-audio-vocalgrad-volume]'": GPU_MODEL,
    "accelerate launch finetune/train.py --model qwen2-audio-7b-instruct ...": GPU_MODEL,
    "python -m finetune.report 'runs/lora-*' --out runs/matrix": "needs LoRA training runs",
    "harness eval --model qwen2-audio-7b-instruct --model-arg adapter=runs/lora-volume/adapter --source vctk ...":
        GPU_MODEL,
    "harness leaderboard submit runs/X --model-name 'My model' --out subs/my-model.json": "needs a run",
    "harness leaderboard validate subs/my-model.json": "needs a submission",
    "harness leaderboard build subs --out site": "needs submissions",
    "vocalgrad-finetune --model tiny-qwen2-audio --category volume --source demo --scope all_linear --method pclm "
    "--max-steps 2 --skip-eval --out runs/pclm": "training, minutes on CPU (tests/test_pclm.py)",
    "vocalgrad-finetune --model tiny-qwen2-audio --category volume --source demo --scope all_linear --objective dpo "
    "--dpo-lr 5e-7 --max-steps 2 --skip-eval --out runs/dpo": "training, minutes on CPU (tests/test_finetune_recipes.py)",
    "vocalgrad-finetune --model tiny-qwen2-audio --source demo --recipe pclm+dpo --category volume,pitch "
    "--dpo-category speed --val-category noise --max-steps 2 --skip-eval --out runs/pclm-dpo":
        "training, minutes on CPU (tests/test_finetune_recipes.py runs a shorter one)",
    "vocalgrad-finetune ... --objective dpo --init-adapter runs/sft --out runs/sft-dpo":
        "needs a trained run (tests/test_finetune_recipes.py)",
    "vocalgrad-finetune --model tiny-qwen2-audio --category voxparadox-pitch --scope all_linear --objective dpo "
    "--train-limit 8 --max-steps 2 --eval-base --eval-limit 20 --eval-mode choices --out runs/dpo-pitch":
        "training and two evaluations (tests/test_finetune_items.py runs a shorter one)",
    "harness eval --model tiny-qwen2-audio --adapter runs/pclm --source demo --configs volume --out runs/pclm-eval":
        "needs the PCLM run above",
    "harness compare runs/pclm/eval_base runs/pclm/eval": "needs the PCLM run above",
    "vocalgrad-listen serve --config volume --source demo --n 24": "a web server that runs until stopped",
    "vocalgrad-listen serve --config voxparadox-pitch --n 20 --db pitch-study.sqlite":
        "a web server that runs until stopped (tests/test_listening_mcq.py serves such a study)",
    "vocalgrad-listen annotators --db listening-study.sqlite --add 3": "needs the study that serve creates",
    "vocalgrad-listen analyze --db listening-study.sqlite": "needs a study with answers",
    "vocalgrad-listen export --db listening-study.sqlite --out runs/human --submission subs/human.json":
        "needs a study with answers",
    "harness report runs/MODEL runs/human": "needs a model run and the human run",
    "harness eval --model signal-oracle --configs volume-conflict,pitch-conflict --out runs/oracle-conflict":
        "~40 s on one core (tests/test_conflict_metrics.py)",
    "harness eval --model transcript-reader --configs volume-conflict --out runs/reader-conflict":
        "a Whisper model from the Hub",
    "harness report runs/oracle-conflict runs/reader-conflict": "needs the two runs above",
    "python scripts/vendor_claims.py": "needs espeak-ng and flite; rewrites the vendored carriers",
    "python benchmarks/bench_reader_claim_following.py --out runs/reader-cf": "Whisper tiny.en on ~800 clips: "
    "about an hour of a loaded 2-core CPU",
    "harness eval --model qwen2-audio-7b-instruct --dataset PATH_OR_REPO --out runs/vp --kind mcq --columns "
    "audio=audio,question=question,options=options,answer=answer,adversarial=adversarial,task=task": GPU_MODEL,
    # docs/published-benchmarks.md: a 7B model and the benchmark from the Hub (tests/test_published_benchmarks.py
    # runs each config with --model random on fixtures in the published layouts)
    "harness eval --model qwen2-audio-7b-instruct --configs voxparadox --out runs/voxparadox": GPU_MODEL,
    "harness eval --model qwen2-audio-7b-instruct --configs mmsu --out runs/mmsu": GPU_MODEL,
    "harness eval --model qwen2-audio-7b-instruct --configs mmsu-paralinguistic --out runs/mmsu-para": GPU_MODEL,
    "harness eval --model qwen2-audio-7b-instruct --configs mmau-test-mini --out runs/mmau": GPU_MODEL,
    "harness eval --model qwen2-audio-7b-instruct --configs mmar --dataset MMAR/MMAR-meta.json --out runs/mmar":
        GPU_MODEL,
    "python scripts/make_voxparadox_bases.py --verify": "needs espeak-ng; rewrites the vendored base utterances",
    "python scripts/freeze_voxparadox_ids.py --split test": "Whisper on ~1,000 items, an hour on 2 cores; "
    "rewrites the frozen lists",
    "harness eval --model transcript-reader --configs voxparadox-gender,voxparadox-pitch --split test --out runs/r":
        "Whisper tiny.en on 200 items built in memory from the vendored bases (minutes on CPU)",
    "python benchmarks/bench_eval_pipeline.py --tiny-limit 16": "a benchmark (about a minute; its exit code depends "
    "on the machine's free cores)",
    "harness eval --model random --dataset items.csv --kind classify --columns audio=wav,label=emotion,id=utt "
    "--mode choices --out runs/emotion": "needs a local items.csv (tests/test_classification.py runs the same shape)",
    "harness eval --model kimi-audio --model-arg trust_remote_code=true --dataset MELD.Raw --kind classify "
    "--mode choices --out suite/runs/meld-base":
        "needs the real MELD download and a Kimi-Audio checkpoint (tests/test_paper_meld.py: the fixture)",
    "harness eval --model kimi-audio --model-arg trust_remote_code=true --adapter finetune/volume --dataset MELD.Raw "
    "--kind classify --mode choices --out suite/runs/meld-volume": "needs the real MELD download and a Kimi-Audio checkpoint",
    "harness eval --model kimi-audio --model-arg trust_remote_code=true --adapter finetune/pitch --dataset MELD.Raw "
    "--kind classify --mode choices --out suite/runs/meld-pitch": "needs the real MELD download and a Kimi-Audio checkpoint",
    "vocalgrad-finetune --model kimi-audio --model-arg trust_remote_code=true --category volume --scope all_linear "
    "--skip-eval --out suite/finetune/volume": RUNTIME_NEEDED,
    "harness eval --model kimi-audio --model-arg trust_remote_code=true --adapter suite/finetune/volume "
    "--out suite/runs/finetune-volume": RUNTIME_NEEDED,
    "vocalgrad-paper --model kimi-audio --model-arg trust_remote_code=true --out suite --only main,finetune":
        "the main run of Kimi-Audio on VCTK: hours on a GPU (tests/test_finetune_tables.py: the tables)",
    "vocalgrad-finetune --model kimi-audio --model-arg trust_remote_code=true --category volume --scope all_linear "
    "--out runs/kimi-volume": RUNTIME_NEEDED,
    "vocalgrad-finetune --model mimo-audio --category pitch --scope lm_head --out runs/mimo-pitch": RUNTIME_NEEDED,
    "vocalgrad-finetune --model step-audio-2-mini --model-arg trust_remote_code=true --category volume "
    "--scope all_linear --out runs/step-volume": RUNTIME_NEEDED,
    "harness eval --model kimi-audio --model-arg trust_remote_code=true --adapter runs/kimi-volume "
    "--out runs/kimi-volume-eval": RUNTIME_NEEDED,
    "vocalgrad-paper --model kimi-audio --out suite --tables-only": "needs the three MELD runs above",
    "vocalgrad-dataset build --config voxparadox-pitch --split test --out D": "~2 minutes (tests/test_voxparadox.py)",
    "harness eval --model mcq-signal-oracle --configs voxparadox-gender,voxparadox-pitch --split test --dataset D "
    "--out runs/o": "needs the VoxParadox build above",
}

COMMANDS = readme_commands()


def test_every_readme_command_is_run_or_skipped_with_a_reason() -> None:
    keys = [c.key for c in COMMANDS]
    unlisted = [f"{c.file}:{c.line}: {c.key}" for c in COMMANDS if c.key not in RUN and c.key not in SKIP]
    assert not unlisted, "README commands neither run nor skipped (add to RUN, or to SKIP with a reason):\n" + "\n".join(
        unlisted)
    stale = sorted((set(RUN) | set(SKIP)) - set(keys))
    assert not stale, f"RUN/SKIP name commands the README no longer has: {stale}"
    assert not set(RUN) & set(SKIP)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c.file}:{c.line}")
def test_readme_command_is_accepted_by_its_parser(command: Command, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        found = invocations(command.argv)
        for invocation in found:
            with pytest.raises(_Parsed):
                check_arguments(invocation, monkeypatch)
    except SystemExit as exc:  # argparse's error, already printed on stderr
        pytest.fail(f"{command.file}:{command.line}: `{command.key}` is refused by its parser (exit {exc.code})")
    if not found:
        assert command.key in SKIP or command.key in RUN, f"{command.file}:{command.line}: not ours, neither run nor skipped"


ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's code, also in a subprocess started elsewhere


def _run(argv: list[str], cwd: Path) -> str:
    """One README command as a user runs it, from `cwd`; returns its stdout (fails on a non-zero exit)."""
    if argv[0] == "python":
        done = subprocess.run([sys.executable, *argv[1:]], cwd=cwd, env=ENV, capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout
    module = CONSOLE_SCRIPTS[argv[0]].split(":")[0]
    code = f"import sys; from {module} import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, *argv[1:]], cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, f"{shlex.join(argv)}: exit {done.returncode}\n{done.stderr[-2000:]}"
    return done.stdout


def test_cheap_offline_readme_commands_run_end_to_end(tmp_path: Path) -> None:
    outputs: dict[str, str] = {}
    for key, (bound, check) in RUN.items():
        argv = [bound.get(w, w) for w in shlex.split(key)]
        outputs[key] = _run(argv, tmp_path)
        check(outputs[key], outputs)


def test_readme_keeps_the_two_newcomer_commands() -> None:
    in_readme = {c.key for c in COMMANDS if c.file == "README.md"}
    assert {"bash scripts/demo.sh", "bash scripts/test.sh"} <= in_readme
