"""Entry point for data-parallel runs: `accelerate launch harness/eval.py --model NAME --out DIR ...`
(or `accelerate launch -m harness.eval ...`).

Same arguments as `harness eval`; each accelerate process evaluates its slice of the source clips.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> int:
    """Run `harness eval` with this process's arguments."""
    if __package__ in (None, ""):
        # Run as a file, Python puts harness/ itself first on sys.path, where its module names (data, metrics,
        # results, ...) would shadow same-named top-level packages: drop it, and make the repository importable
        # for a checkout that is not installed.
        here = Path(__file__).resolve().parent
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
        sys.path.insert(0, str(here.parent))
    from harness.cli import main as harness_main

    return harness_main(["eval", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
