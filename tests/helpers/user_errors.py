"""Shared checks for the fault tests: a user error is one `error:` line, and a read-only folder as a lab
account sees it (root ignores permissions unless the capability is dropped)."""

from __future__ import annotations

import os
import shutil

import pytest


def assert_one_error_line(code: int, err: str, *needles: str) -> str:
    """A user error: exit 2, no traceback, one `error:` line holding every needle; returns that line."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def without_root_override() -> list[str]:
    """The command prefix that makes permissions bind for root too (skips the test when that is impossible)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a read-only folder cannot be reproduced")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
