"""One typed item through the runner (lm-evaluation-harness's `Instance`): a benchmark row goes in with its
prompt and answer vocabulary; the model's responses come back into it, and its samples row is read off it.

The runner never keeps parallel lists: a batch is a list of Items. An Item whose prompt could not be built
(bad audio, say) carries that error and is never sent to the model; a row process may build the prompt
ahead (`prepared`), else the main process does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.models.protocol import ModelError, Prompt
from harness.parsing import Vocabulary
from harness.results import SampleRow


def error_text(err: BaseException) -> str:
    """An error row's text; a ModelError's message already names the underlying exception type."""
    return err.message if isinstance(err, ModelError) else f"{type(err).__name__}: {err}"


@dataclass
class Item:
    """A row, its prompt and vocabulary (set by `prepare`), and what the model answered (`responses`, in order:
    the first answer, then the retry; or the choice scores)."""

    row: dict[str, Any]
    prompt: Prompt | None = None
    vocab: Vocabulary | None = None
    error: str | None = None  # why the prompt could not be built
    responses: list[str | np.ndarray | ModelError] = field(default_factory=list)

    @property
    def clip_id(self) -> str:
        return str(self.row["benchmark_clip_id"])

    @property
    def prepared(self) -> bool:
        """True once the prompt was built or failed to build."""
        return self.prompt is not None or self.error is not None

    @property
    def live(self) -> bool:
        """True while the model still has to answer it (a prompt, and no failed response yet)."""
        return self.prompt is not None and not any(isinstance(r, ModelError) for r in self.responses)

    @property
    def unparsed(self) -> bool:
        """True when its generated answer was read as no option (the retry's condition)."""
        last = self.responses[-1] if self.responses else None
        return isinstance(last, str) and self.vocab is not None and self.vocab.parser.parse(last) is None

    def answer(self) -> dict[str, Any]:
        """The samples row's answer fields: pred, raw, parsed, margin, error and retried, from the responses."""
        out: dict[str, Any] = {"pred": None, "raw": None, "parsed": False, "margin": None, "error": self.error,
                               "retried": len(self.responses) > 1}
        for value in self.responses:
            if isinstance(value, ModelError):
                out["error"] = error_text(value)
                break
            if isinstance(value, str):
                pred = self.vocab.parser.parse(value) if self.vocab is not None else None
                out.update(raw=value, pred=pred, parsed=pred is not None)
            else:
                pred, word, margin = self.vocab.decide(value) if self.vocab is not None else (None, None, None)
                out.update(pred=pred, raw=word, parsed=pred is not None, margin=margin)
        return out


def sample_row(item: Item, base: SampleRow) -> SampleRow:
    """The samples row of an answered item: `base` (its fixed fields, in the file's key order) with the answer."""
    return {**base, **item.answer()}  # every answer field is already a key of base: the order stays the file's
