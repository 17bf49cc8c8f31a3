"""Direction and scale of lm-eval's metrics, declared, never guessed from a harness metric's name.

The direction is the task's own ``higher_is_better`` (lm-eval declares it per metric). The scale is
this table's, one row per metric lm-eval 0.4.13 registers (``lm_eval/api/metrics.py``): accuracies
and match rates are fractions, sacrebleu's BLEU, chrF and TER are 0-100, perplexities and
loglikelihoods are unbounded. A metric lm-eval does not register (a task's own Python function) is
``raw``: shown on an unbounded axis, ranked by its declared direction.
"""

from __future__ import annotations

from harness.types import Direction, MetricInfo, Scale

SCALES: dict[str, Scale] = {
    **{m: "fraction" for m in ("acc", "acc_norm", "acc_bytes", "acc_mutual_info", "exact_match", "f1",
                               "brier_score", "acc_all")},
    **{m: "percent" for m in ("bleu", "chrf", "ter")},
    **{m: "raw" for m in ("perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte", "likelihood",
                          "loglikelihood", "mcc", "matthews_corrcoef")},
}


def metric_info(metric: str, higher_is_better: bool | None) -> MetricInfo:
    direction: Direction | None = None if higher_is_better is None else ("higher" if higher_is_better else "lower")
    return MetricInfo(direction, SCALES.get(metric, "raw"), metric)
