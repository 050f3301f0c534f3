"""What every console script says about itself: `--version`, and the defaults in `--help`.

Light on purpose: `--version` and `--help` answer without importing numpy, datasets or torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "vocalgrad"  # pyproject.toml [project] name


def package_version() -> str:
    """The installed vocalgrad version, e.g. "0.1.0" ("0.1.0+src" in a checkout that was never installed)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0.1.0+src"


def add_version_argument(parser: argparse.ArgumentParser) -> None:
    """`--version`: print "<prog> <version>" and exit 0."""
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}",
                        help="print the vocalgrad version and exit")


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """--help adds "(default: ...)" to every option with a meaningful default (not None, False or []) whose
    help does not already say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text, default = action.help or "", action.default
        switch = isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction)  # --x / --no-x: on/off
        if "default" in text or action.required or default is None or default is False or default == [] \
                or default is argparse.SUPPRESS or not action.option_strings or switch:
            return text
        return f"{text} (default: %(default)s)"


Command = Callable[..., argparse.ArgumentParser]


def subcommands(parser: argparse.ArgumentParser, dest: str = "command") -> Command:
    """Required subcommands under `parser`; returns command(name, help, description, run=None) -> its
    parser, each with a description and its defaults shown in --help; `run(namespace)` is what it does."""
    sub = parser.add_subparsers(dest=dest, required=True, metavar="COMMAND")

    def command(name: str, helptext: str, description: str, run: Callable[..., int] | None = None
                ) -> argparse.ArgumentParser:
        found = sub.add_parser(name, help=helptext, description=description, formatter_class=DefaultsHelpFormatter)
        if run is not None:
            found.set_defaults(func=run)
        return found

    return command


def console_script(prog: str, description: str) -> tuple[argparse.ArgumentParser, Command]:
    """A console script's parser (`--version`, defaults in --help) and its subcommand maker."""
    parser = argparse.ArgumentParser(prog=prog, description=description, formatter_class=DefaultsHelpFormatter)
    add_version_argument(parser)
    return parser, subcommands(parser)


def quiet_broken_pipe() -> int:
    """`cmd ... | head`: the reader left; stop quietly (no traceback, no flush error at exit), exit 141."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader closed the pipe


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None,
                user_errors: tuple[type[BaseException], ...], prefix: str = "error") -> int:
    """Parse, run the chosen subcommand (its `func`), and turn what a user can fix into one line on stderr
    (exit 2), as well as a file-system error on a named path (read-only folder, a file given as a folder); a
    closed pipe into a quiet exit 141 and Ctrl-C into 130; anything else stays a traceback."""
    ns = parser.parse_args(argv)
    from vocalgrad_dataset.progress import no_library_bars, progress_off

    if progress_off():  # VOCALGRAD_PROGRESS=off silences transformers' and the Hub's bars too
        no_library_bars()
    try:
        code = ns.func(ns)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except BrokenPipeError:
        return quiet_broken_pipe()
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    except user_errors as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err  # KeyError quotes its text
        print(f"{prefix}: {message}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.filename is None:  # not about a path the user gave: a bug or a machine fault, keep the traceback
            raise
        print(f"{prefix}: {path_error(err)}", file=sys.stderr)
        return 2


def path_error(err: OSError) -> str:
    """One line for a file-system error on a path (a file where a folder is needed, read-only, no space...)."""
    where = f"{err.filename}" + (f" -> {err.filename2}" if err.filename2 else "")
    return f"cannot use {where}: {err.strerror or err}"
