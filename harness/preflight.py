"""A few high-tier clips before a long run: a model that cannot hear the audio should fail in a minute.

A wrong chat template, a missing adapter (Phi-4's speech LoRA) or audio that never reaches the model
give answers that parse badly or refuse ("I cannot listen to audio"); scored for hours they would look
like a 50 % model. The preflight asks the run's own question on up to PREFLIGHT_CLIPS high-tier clips of
the first config, exactly as the run will, and stops the run when most answers are unusable.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.models.protocol import AudioLM

PREFLIGHT_CLIPS = 8
# Language models with real weights; baselines, tiny random-weight models and feature encoders are exempt
# (their answers would only test the tests). A wrapper of one's own opts in by its `kind`.
CHECKED_KINDS = frozenset({"hf", "external", "api"})
REFUSAL = re.compile(
    r"\b(?:can ?not|can't|unable to|not able to|don't have the ability to|do not have the ability to)\b"
    r"[^.?!]{0,40}\b(?:listen|hear|process|access|analy[sz]e|play|perceive)\w*"
    r"|\bno audio\b|\bas an? (?:ai|text-based|language model)\b",
    re.IGNORECASE,
)
ADVICE = ("Usually the chat template is wrong for this checkpoint, an adapter it needs is not loaded (e.g. "
          "Phi-4-multimodal's speech-lora), or the audio never reaches the model (audio placeholder token, "
          "sampling rate, processor). Check `harness eval ... --limit 8` answers by hand; --no-preflight runs anyway.")


class PreflightError(ValueError):
    """Most preflight answers were unparsed or refusals; the message shows two of them."""


@dataclass
class PreflightResult:
    """What the preflight asked and how the answers fared (recorded in results.json)."""

    config: str
    n: int = 0
    unparsed: int = 0  # no answer word (includes error rows)
    refusals: int = 0  # parsed or not, the text says the model cannot hear audio
    examples: list[str] = field(default_factory=list)  # raw answers of the bad ones (at most two)

    @property
    def bad(self) -> int:
        return self.unparsed + self.refusals

    @property
    def passed(self) -> bool:
        return self.n == 0 or self.bad * 2 <= self.n

    def record(self) -> dict[str, Any]:
        """The JSON-able record for results.json."""
        return {**asdict(self), "passed": self.passed}


def is_refusal(text: str | None) -> bool:
    """True for answers saying the model cannot hear or process audio."""
    return bool(text) and REFUSAL.search(text) is not None


def preflight_rows(source: Any, config: str, n: int = PREFLIGHT_CLIPS) -> list[dict[str, Any]]:
    """Up to n high-tier rows of the config's first source clips (both directions, several curves); MCQ items
    have no tier: the first n."""
    rows: list[dict[str, Any]] = []
    for unit in source.units(config):
        rows += [r for r in source.rows(config, [unit]) if r.get("tier", "high") == "high"]  # MCQ rows: no tier
        if len(rows) >= n:
            break
    return rows[:n]


Ask = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]  # benchmark rows -> samples rows, as the run asks


def run_preflight(ask: Ask, source: Any, config: str) -> PreflightResult:
    """Ask the run's question (`ask`: the runner's own batch evaluation) on a few high-tier clips;
    PreflightError when most answers are unusable."""
    result = PreflightResult(config)
    rows = ask(preflight_rows(source, config))
    failed = [r for r in rows if r.get("error") is not None]
    for row in rows:
        result.n += 1
        refused = is_refusal(row.get("raw"))
        result.refusals += refused
        result.unparsed += (not row.get("parsed")) and not refused
        if (refused or not row.get("parsed")) and len(result.examples) < 2:
            result.examples.append(str(row.get("raw") if row.get("error") is None else row["error"]))
    if not result.passed and len(failed) * 2 >= result.bad:  # errors, not answers: no template to blame
        raise PreflightError(f"preflight: {len(failed)} of {result.n} calls on high-tier {config} clips failed "
                             f"before any answer, e.g. {failed[0]['error'][:300]!r}. The model or its endpoint "
                             "could not be reached or crashed; fix that (address, key, server) and rerun.")
    if not result.passed:
        shown = " | ".join(repr(e[:200]) for e in result.examples)
        raise PreflightError(f"preflight: {result.bad} of {result.n} answers on high-tier {config} clips were "
                             f"unparsed ({result.unparsed}) or refusals ({result.refusals}), e.g. {shown}. {ADVICE}")
    return result


def needs_preflight(model: AudioLM, settings: Any, resumed: bool) -> str | None:
    """Why the preflight is skipped (None when it runs)."""
    if not settings.preflight:
        return "--no-preflight"
    if settings.mode != "generate":
        return "choices mode scores the answer words directly"
    if model.kind not in CHECKED_KINDS:
        return f"{model.kind} model"
    if resumed:
        return "resumed run"
    return None
