"""Progress for long steps that also shows in batch-job logs: a tqdm bar on a terminal, plain lines elsewhere.

tqdm on a non-terminal either prints nothing (`disable=None`) or floods the log with carriage-return frames;
a job log then looks hung for hours. `progress()` returns tqdm when the stream is a terminal and otherwise
a `LineProgress` that prints one complete line each time another `every_percent` of the total is done (and
at least every `every_seconds` while updates arrive), plus a last line at close. It accepts the tqdm
arguments the project uses (extra ones are ignored in line mode), so a call site changes only its import:

    from vocalgrad_dataset.progress import progress
    bar = progress(total=n, desc="pitch", unit="clip")  # then bar.update(k) ... bar.close()

`VOCALGRAD_PROGRESS=lines|bar|off` forces a mode.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any

MODES = ("auto", "bar", "lines", "off")


def _hms(seconds: float) -> str:
    s = int(max(0, seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class LineProgress:
    """A tqdm-compatible counter that writes whole lines: `desc: 40% 8/20 shard, 0:01:02 elapsed, ~0:01:33 left`."""

    def __init__(self, iterable: Iterable[Any] | None = None, *, total: float | None = None, desc: str = "",
                 unit: str = "it", initial: float = 0, file: IO[str] | None = None, every_percent: float = 5.0,
                 every_seconds: float = 60.0, disable: bool = False, **_: Any) -> None:
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.file = file if file is not None else sys.stderr
        self.every_percent, self.every_seconds, self.disable = every_percent, every_seconds, disable
        self.start = self.last_time = time.monotonic()
        self.start_n = initial
        self.last_step = self._step()
        self.closed = False
        self.postfix = ""
        self.emitted_n: float | None = None

    def _step(self) -> int:
        if not self.total:
            return 0
        return int(100.0 * self.n / self.total / self.every_percent)

    def line(self) -> str:
        """The current progress as one line."""
        elapsed = time.monotonic() - self.start
        head = f"{self.desc}: " if self.desc else ""
        if self.total:
            pct = 100.0 * self.n / self.total
            done = self.n - self.start_n
            rate = done / elapsed if elapsed > 0 else 0.0
            left = f", ~{_hms((self.total - self.n) / rate)} left" if rate > 0 and self.n < self.total else ""
            text = f"{head}{pct:3.0f}% {self.n:g}/{self.total:g} {self.unit}, {_hms(elapsed)} elapsed{left}"
        else:
            text = f"{head}{self.n:g} {self.unit}, {_hms(elapsed)} elapsed"
        return text + (f" [{self.postfix}]" if self.postfix else "")

    def _emit(self) -> None:
        if self.disable:
            return
        try:
            print(self.line(), file=self.file, flush=True)
        except (OSError, ValueError):
            self.disable = True  # a closed or broken log must not stop the work
        self.last_time = time.monotonic()
        self.emitted_n = self.n

    def update(self, n: float = 1) -> None:
        """Count n more units; print a line when a new `every_percent` step (or `every_seconds`) is reached."""
        self.n += n
        step = self._step()
        if step > self.last_step or time.monotonic() - self.last_time >= self.every_seconds:
            self.last_step = step
            self._emit()

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
        """Append `key=value` pairs to later lines (tqdm's set_postfix)."""
        items = {**(dict(ordered_dict) if ordered_dict else {}), **kwargs}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        """Change the label of later lines."""
        self.desc = desc or ""

    def refresh(self) -> None:
        """Nothing to redraw in line mode."""

    def write(self, s: str) -> None:
        """Print a message line (tqdm.write's instance form)."""
        if not self.disable:
            print(s, file=self.file, flush=True)

    def close(self) -> None:
        """Print the final state once (unless the last line already showed it)."""
        if not self.closed:
            self.closed = True
            if self.emitted_n != self.n:
                self._emit()

    def __iter__(self) -> Iterator[Any]:
        if self.iterable is None:
            raise TypeError("LineProgress was created without an iterable")
        try:
            for item in self.iterable:
                yield item
                self.update()
        finally:
            self.close()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _mode(file: IO[str]) -> str:
    mode = os.environ.get("VOCALGRAD_PROGRESS", "auto").strip().lower() or "auto"
    if mode not in MODES:
        mode = "auto"
    if mode == "auto":
        try:
            return "bar" if file.isatty() else "lines"
        except (AttributeError, ValueError):
            return "lines"
    return mode


def progress(iterable: Iterable[Any] | None = None, *, total: float | None = None, desc: str = "", unit: str = "it",
             initial: float = 0, disable: bool | None = False, file: IO[str] | None = None,
             every_percent: float = 5.0, every_seconds: float = 60.0, **tqdm_kwargs: Any) -> Any:
    """A tqdm bar on a terminal, a LineProgress (one line per `every_percent`) otherwise; `disable=True` is silent.

    `disable=None` means what it means in tqdm ("not a terminal"), except that lines are printed instead.
    """
    stream = file if file is not None else sys.stderr
    mode = _mode(stream)
    if disable or mode == "off":
        return LineProgress(iterable, total=total, desc=desc, unit=unit, initial=initial, disable=True)
    if mode == "bar":
        from tqdm.auto import tqdm

        return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, file=stream, **tqdm_kwargs)
    return LineProgress(iterable, total=total, desc=desc, unit=unit, initial=initial, file=stream,
                        every_percent=every_percent, every_seconds=every_seconds)


QUIET_LOGGERS = ("transformers", "accelerate", "datasets", "huggingface_hub", "peft", "torch.distributed")


def quiet_third_party(verbose: bool = False) -> None:
    """Show our progress only: the libraries' own progress bars (weight loading, downloads), their info and
    warning logs and FutureWarnings are hidden unless `verbose` (`--verbose`; VOCALGRAD_PROGRESS=off still hides
    the bars then). Errors still show."""
    if progress_off():
        no_library_bars()
    if verbose:
        return
    import logging
    import warnings

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore", category=FutureWarning)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
    except ImportError:  # the dataset tools run without transformers
        pass
    no_library_bars()


def no_library_bars() -> None:
    """Hide the libraries' own progress bars: huggingface_hub's downloads, transformers' "Loading weights",
    datasets' bars. The variables reach a library imported later (transformers reads the Hub's at import); one
    already imported is switched off directly. Nothing is imported here (a CLI start stays fast)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()


def progress_off() -> bool:
    """True under VOCALGRAD_PROGRESS=off: then no progress of any library shows either (every entry point)."""
    return os.environ.get("VOCALGRAD_PROGRESS", "").strip().lower() == "off"
