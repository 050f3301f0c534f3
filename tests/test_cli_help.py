"""Every console script answers --version and --help; each command has a description and shows its defaults;
boolean flags read naturally (--no-figures, --no-preflight, never --figures false).

vocalgrad-paper and vocalgrad-finetune are left out while they are being rewritten (no --version yet).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# console script -> the function that builds its parser (pyproject [project.scripts] names the same modules)
SCRIPTS = {
    "harness": ("harness.cli", "build_parser"),
    "vocalgrad-dataset": ("vocalgrad_dataset.cli", "parser"),
    "vocalgrad-listen": ("listening.cli", "build_parser"),
    "vocalgrad-paper": ("harness.paper.cli", "build_parser"),
    "vocalgrad-finetune": ("finetune.train", "build_parser"),
}


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The script as its entry point runs it: `main(argv)` in a fresh interpreter (our checkout first)."""
    code = f"import sys; from {module} import main; sys.exit(main({list(args)!r}))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def _parser(script: str) -> argparse.ArgumentParser:
    module, func = SCRIPTS[script]
    return getattr(__import__(module, fromlist=[func]), func)()


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """The parser and every (nested) subcommand parser, with the words that reach it."""
    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _commands(sub, (*path, name))
    return out


def test_pyproject_names_these_entry_points() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    for script, (module, _) in SCRIPTS.items():
        assert f'{script} = "{module}:main"' in text


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_version_and_help_of_every_command(script: str) -> None:
    module = SCRIPTS[script][0]
    out = _run(module, "--version")
    assert out.returncode == 0 and out.stdout.strip() == f"{script} {version('vocalgrad')}", out.stderr
    parser = _parser(script)
    assert parser.prog == script  # names itself as the console script, not as a file path
    for words, sub in _commands(parser):
        where = " ".join((script, *words))
        assert sub.description and len(sub.description) > 20, f"{where}: no description"
        helptext = sub.format_help()
        for action in sub._actions:
            if not action.option_strings or action.required or action.help == argparse.SUPPRESS:
                continue
            assert action.help, f"{where} {action.option_strings[0]}: no help text"
            switch = isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction)  # says itself
            if action.default not in (None, False, [], argparse.SUPPRESS) and not switch and not isinstance(
                    action, argparse._VersionAction | argparse._HelpAction):
                shown = sub._get_formatter()._expand_help(action)
                assert "default" in shown, f"{where} {action.option_strings[0]}: default {action.default!r} not shown"
        assert "%(default)" not in helptext and "(default: True)" not in helptext  # a --no-x switch is on by default
        if isinstance(sub, argparse.ArgumentParser) and words:
            assert _run(module, *words, "--help").returncode == 0, where


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_boolean_flags_read_naturally(script: str) -> None:
    """A switch that turns something off is spelt --no-<thing>; one that turns something on never is."""
    for words, sub in _commands(_parser(script)):
        for action in sub._actions:
            flag = next((o for o in action.option_strings if o.startswith("--")), None)
            if flag is None:
                continue
            if isinstance(action, argparse._StoreFalseAction):
                assert flag.startswith("--no-"), f"{script} {' '.join(words)} {flag}: turns off, so --no-..."
            if isinstance(action, argparse._StoreTrueAction) and action.dest.startswith("no_"):
                assert flag == "--" + action.dest.replace("_", "-"), flag
            if flag.startswith("--no-"):
                assert isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction), flag


def test_eval_and_build_show_the_defaults_a_user_asks_about() -> None:
    """Mode, split, source and batch size: the defaults the issue names."""
    harness = dict(_commands(_parser("harness")))
    text = " ".join(harness[("eval",)].format_help().split())
    for shown in ("score the answer words (default: generate)", "--split SPLIT train or test (default: test)",
                  "package.module:Factory (default: the configs' own: claims for -conflict configs, beep for "
                  "beep-*, else vctk)", "halve on out-of-memory (default: 8)"):
        assert shown in text, shown
    text = " ".join(dict(_commands(_parser("vocalgrad-dataset")))[("build",)].format_help().split())
    for shown in ("every split the source has) (default: test)", "vctk (default; beep configs: beep; -conflict configs: "
                  "claims)", "(>= 1) (default: 4)"):
        assert shown in text, shown


@pytest.mark.parametrize("argv", [["harness.cli", "list-models"], ["listening.cli", "sample", "--config", "volume",
                                                                     "--n", "8", "--seed", "0"]])
def test_a_closed_pipe_ends_quietly(argv: list[str]) -> None:
    """`harness list-models | head`: the reader is gone before anything is written; exit 141, no traceback."""
    r, w = os.pipe()
    os.close(r)
    proc = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, stdout=w,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(w)
    assert proc.stderr == "" and proc.returncode == 141
