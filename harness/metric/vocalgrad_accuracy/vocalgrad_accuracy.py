"""VocalGrad accuracy as an `evaluate` metric: raw model outputs vs gold labels, parsed as SPEC §5 says.

Load offline from the checkout: `evaluate.load("harness/metric/vocalgrad_accuracy")`. The parsing and
the arithmetic are harness.parsing and harness.metrics, so this module adds no second implementation.
"""

import datasets
import evaluate

from harness.metrics import summarize
from harness.parsing import get_parser

_DESCRIPTION = """All-clip accuracy of increase/decrease answers (unparsed = wrong), with parsed and balanced
accuracy, "increase" ratio, exact-match rate and 95 % Wilson intervals; undefined values are None."""

_KWARGS = """
Args:
    predictions: raw model outputs (str).
    references: gold labels, "increase" or "decrease".
    parser: "main" (increase/decrease words) or "synonym" (the paraphrase vocabulary).
    answer_words: the prompt's two answer words for the exact-match rate (default increase, decrease).
    source_clip_ids: optional cluster ids for the clustered standard error (None without them).
Returns:
    accuracy, accuracy_stderr, accuracy_ci_low, accuracy_ci_high, parsed_accuracy, balanced_accuracy,
    increase_ratio, exact_match_rate, exact_match_accuracy, n, n_parsed, n_unparsed, ...
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class VocalgradAccuracy(evaluate.Metric):
    """VocalGrad's headline metric."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="Ryu & Yanaka (2026), VocalGrad: Evaluating Acoustic Perception in Audio Language Models",
            inputs_description=_KWARGS,
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Value("string")}),
        )

    def _compute(self, predictions, references, parser="main", answer_words=("increase", "decrease"),
                 source_clip_ids=None):
        p = get_parser(parser)
        # No cluster ids given: no clustered SE (None), rather than a row-level SE presented as clustered.
        clusters = source_clip_ids if source_clip_ids is not None else [None] * len(predictions)
        rows = []
        for raw, gold, cluster in zip(predictions, references, clusters, strict=True):
            if gold not in ("increase", "decrease"):
                raise ValueError(f"references must be 'increase' or 'decrease', got {gold!r}")
            pred = p.parse(raw)
            rows.append({"raw": raw, "gold": gold, "pred": pred, "parser": p.id,
                         "answer_words": list(answer_words), "source_clip_id": cluster, "error": None})
        return summarize(rows)
