"""lm-evaluation-harness's per-sample keys, added to every samples line beside our own fields.

lm-eval's `--log_samples` writes one JSON line per document (lm_eval/evaluator.py builds the record,
lm_eval/loggers/evaluation_tracker.py `save_results_samples` flattens it; lm_eval/result_schema.py
`SampleResult` documents it). Tools written for those files read these keys; ours stay as they were:

- `doc_id`: the clip's index in its config's full dataset order (lm-eval's index of the document in the split;
  a `--limit` run keeps each clip's index, as lm-eval does for `--samples`).
- `doc`: the document: the row's dataset fields (clip id, category, gold label, the kind's breakdown fields),
  without anything the run produced; so its hash is the same for every model and prompt variant.
- `target`: str(gold), as lm-eval writes `str(doc_to_target(doc))`.
- `arguments`: `{"gen_args_0": {"arg_0": prompt, "arg_1": gen_kwargs}}`, lm-eval's flattened
  (context, gen_kwargs) of a generation request; the prompt is our text with `<audio>` where each clip goes,
  gen_kwargs the token budget of the answer kept (`max_gen_toks`: the retry's when it ran) or, in choices
  mode, the answer words scored.
- `resps`: `[[answer]]` and `filtered_resps`: `[answer]`: the model's final text under lm-eval's "none" filter
  (take the first response), strings as its `sanitize_list` leaves them; "" for an error row (no answer).
  Choices mode records the chosen answer word (its log-probability margin stays in `margin`).
- `filter` "none", `metrics` ["accuracy"] and `accuracy` 1.0 / 0.0 (parsed and equal to the gold label).
- `doc_hash`, `prompt_hash`, `target_hash`: sha256 hex (lm-eval's `hash_string`) of
  `json.dumps(doc, indent=2, ensure_ascii=False)`, of the prompt and of the target.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from harness.results import LM_EVAL_FILTER, dumps_row

ROW_METRIC = "accuracy"
# What a run produces (never part of the document, whose hash must not depend on the model or the prompt).
# A listening test's answers carry who answered and how fast (listening/export.py): the run's too.
RUN_FIELDS = frozenset({"pred", "raw", "parsed", "margin", "prompt", "prompt_variant", "answer_words", "parser",
                        "error", "retried", "model", "mode", "annotator", "rt_ms"})
LM_EVAL_KEYS = ("doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics", "doc_hash",
                "prompt_hash", "target_hash", ROW_METRIC)


def hash_string(text: str) -> str:
    """sha256 hex of the UTF-8 text (lm-eval's hash_string)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sample_doc(row: Mapping[str, Any]) -> dict[str, Any]:
    """The document a samples row answers: its dataset fields, as they are written (NaN as null)."""
    doc = {k: v for k, v in row.items() if k not in RUN_FIELDS and k not in LM_EVAL_KEYS}
    return json.loads(dumps_row(doc))


def _gen_kwargs(row: Mapping[str, Any], budgets: tuple[int, int]) -> dict[str, Any]:
    """lm-eval's second request argument: the budget of the answer kept, or the words scored."""
    if row.get("mode") == "choices":
        return {"choices": list(row.get("answer_words") or [])}
    return {"max_gen_toks": budgets[1] if row.get("retried") else budgets[0]}


def lm_eval_fields(row: Mapping[str, Any], doc_id: int, budgets: tuple[int, int]) -> dict[str, Any]:
    """lm-eval's per-sample keys for one samples row (module docstring); `budgets`: (first, retry) token budgets."""
    doc = sample_doc(row)
    target = str(row.get("gold", ""))
    prompt = str(row.get("prompt") or "")
    answer = "" if row.get("error") or row.get("raw") is None else str(row["raw"])
    pred = None if row.get("error") else row.get("pred")
    return {
        "doc_id": doc_id,
        "doc": doc,
        "target": target,
        "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": _gen_kwargs(row, budgets)}},
        "resps": [[answer]],
        "filtered_resps": [answer],
        "filter": LM_EVAL_FILTER,
        "metrics": [ROW_METRIC],
        "doc_hash": hash_string(json.dumps(doc, indent=2, ensure_ascii=False)),
        "prompt_hash": hash_string(prompt),
        "target_hash": hash_string(target),
        ROW_METRIC: float(pred is not None and pred == row.get("gold")),
    }


def with_lm_eval_fields(row: Mapping[str, Any], doc_id: int, budgets: tuple[int, int]) -> dict[str, Any]:
    """The row with lm-eval's keys after our own (a row that already has them gets them anew)."""
    own = {k: v for k, v in row.items() if k not in LM_EVAL_KEYS}
    return {**own, **lm_eval_fields(own, doc_id, budgets)}
