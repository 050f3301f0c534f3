"""VocalGrad evaluation harness: model wrappers, runner, metrics and reports."""
