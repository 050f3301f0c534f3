"""Entry point for data-parallel runs: `accelerate launch harness/eval.py --model NAME --out DIR ...`.

Same arguments as `harness eval`; each accelerate process evaluates its slice of the source clips.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script: put the repository root first and drop harness/ itself, whose module names
    # (data, metrics, results, ...) would otherwise shadow same-named top-level packages.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

from harness.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["eval", *sys.argv[1:]]))
