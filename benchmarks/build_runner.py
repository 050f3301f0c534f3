"""One `vocalgrad-dataset build ...` of the tree TREE, in this process, with `Category.render_clip` timed inside it.

    python benchmarks/build_runner.py TREE TIMES_FILE build --config all --source demo --out DIR --quiet

bench_generator.py --build starts this script once per measured build (ours and an older commit's tree,
extracted with `git archive`), so each side's build runs exactly as its CLI runs it, start-up and interpreter
shutdown included; the parent takes the child's whole CPU time from its rusage. This script imports
nothing of ours: TREE goes first on sys.path and its own `vocalgrad_dataset` is imported from there.

Rendering is the CPU time spent inside `Category.render_clip` (the generator every category's conditions
come out of; each `next()` is timed), so the split does not depend on another process's start-up or on the
load at a different moment. The running total is rewritten to TIMES_FILE whenever a clip's rendering ends,
so it is there even if the CLI leaves with os._exit.
"""

from __future__ import annotations

import os
import sys
import time


def main() -> int:
    tree, times_path, *argv = sys.argv[1:]
    sys.path.insert(0, os.path.abspath(tree))
    from vocalgrad_dataset.categories import base

    where = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(base.__file__))))
    if where != os.path.abspath(tree):  # another vocalgrad_dataset shadowed TREE's: the measurement would be wrong
        print(f"build_runner: imported vocalgrad_dataset from {where}, not {tree}", file=sys.stderr)
        return 2
    original = base.Category.render_clip
    spent = [0.0]

    def timed(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202  (the wrapped method's own signature)
        t = time.process_time()
        it = original(self, *args, **kwargs)
        try:
            while True:
                item = next(it)
                spent[0] += time.process_time() - t
                yield item
                t = time.process_time()
        except StopIteration:
            spent[0] += time.process_time() - t
        with open(times_path, "w") as f:  # a benchmark's scratch file, read after this process ended
            f.write(f"{spent[0]!r}\n")

    base.Category.render_clip = timed
    from vocalgrad_dataset import cli
    sys.argv = ["vocalgrad-dataset", *argv]
    return cli.main()  # as the console script calls it (no argv: the process is the CLI)


if __name__ == "__main__":
    sys.exit(main())
