"""Optimal Mixture Transport tasks: ``omt_synthetic``, ``omt_digits``, ``omt_pbmc``.

One sample is one transport problem: the request carries the labelled source points, the
unlabelled target points and the data kind (``gaussian`` or ``poisson``); the hidden target labels
stay in the sample. The backend transports source to target and replies with a label per target
point plus its diagnostics.

Metrics: ``label_transfer_accuracy`` (share of target points given their true label),
``component_match_accuracy`` (share of true target components/classes whose points mostly receive
the right label: on the synthetic pairs this is the known component correspondence), both
recomputed here from the labels; and the backend's ``transport_cost`` (its own objective's
transport term: mixture-level for ``omt``/``pot:gmm``, sample-level for ``pot:emd``/``pot:sinkhorn``,
so not comparable across the two kinds), ``restart_spread``, ``stability_ratio`` and ``seconds``.
"""

from __future__ import annotations

from typing import Any

from harness.registry import task
from harness.task import ScoreContext, Task
from harness.types import (
    GenerationConfig,
    Message,
    MetricInfo,
    Output,
    Part,
    Request,
    Sample,
    Score,
    higher,
    lower,
    neutral,
    options_part,
    stable_hash,
)

VERSION = "1"
METRICS: dict[str, MetricInfo] = {
    "label_transfer_accuracy": higher("Label transfer accuracy"),
    "component_match_accuracy": higher("Component match accuracy"),
    "transport_cost": neutral("Transport cost (method's own scale)"),
    "restart_spread": lower("Max |plan difference| over restarts"),
    "stability_ratio": lower("Map change under target subsampling / map displacement"),
    "seconds": lower("Seconds (fit + solve)"),
}
PASSED = ("transport_cost", "restart_spread", "stability_ratio", "seconds")


def problem_part(messages: list[Message]) -> dict[str, Any]:
    return options_part(messages, "source", "the request carries no transport problem")


def make_sample(sid: str, D: dict[str, Any], meta: dict[str, Any]) -> Sample:
    opts = {"source": D["Xs"].tolist(), "source_labels": [int(v) for v in D["ys"]], "target": D["Xt"].tolist(),
            "kind": D["kind"]}
    text = (f"Transport {len(D['Xs'])} labelled source points to {len(D['Xt'])} target points "
            f"({D['kind']} data, {D['Xs'].shape[1]} features) and label the target points.")
    return Sample(id=sid, messages=[Message("user", [Part("text", text=text, options=opts)])],
                  target=[int(v) for v in D["yt"]], metadata=meta)


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    import numpy as np

    pred = output.prediction
    if not isinstance(pred, dict) or not isinstance(pred.get("labels"), list):
        return Score.not_scored("the reply holds no target labels")
    truth = np.asarray(sample.target)
    labels = np.asarray(pred["labels"])
    if labels.shape != truth.shape:
        return Score.not_scored(f"{labels.size} labels for {truth.size} target points")
    matched = []
    for c in np.unique(truth):
        got, counts = np.unique(labels[truth == c], return_counts=True)
        matched.append(float(got[np.argmax(counts)] == c))
    values = {"label_transfer_accuracy": float(np.mean(labels == truth)),
              "component_match_accuracy": float(np.mean(matched))}
    for key in PASSED:
        reported = pred.get("cost" if key == "transport_cost" else key)
        if isinstance(reported, int | float):
            values[key] = float(reported)
    return Score(values=values)


def _prompt(sample: Sample) -> Request:
    return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=1))


def _task(samples: list[Sample], options: dict[str, Any]) -> Task:
    digest = stable_hash({"v": VERSION, "options": options, "data": [stable_hash(s.to_dict()) for s in samples]})
    return Task(version=VERSION, load=lambda: list(samples), prompt=_prompt, score=score,
                primary_metric="label_transfer_accuracy", metrics=METRICS, content_hash=digest, options=options)


@task("omt_synthetic", description="Mixture transport between seeded mixture pairs with known component "
      "correspondence (-T n= k= d= shift= family=gaussian|poisson seeds=)", family="transport")
def omt_synthetic(n: int = 1000, k: int = 4, d: int = 2, shift: float = 3.0, family: str = "gaussian",
                  seed: int = 0, seeds: int = 1) -> Task:
    from harness.tasks.transport.data import synthetic

    n, k, d, seed, seeds, shift = int(n), int(k), int(d), int(seed), int(seeds), float(shift)
    if family not in ("gaussian", "poisson"):
        raise ValueError(f"unknown family {family!r}; choose gaussian or poisson")
    if n < 10 * k or k < 2 or d < 1 or seeds < 1:
        raise ValueError(f"need k >= 2, d >= 1, seeds >= 1 and n >= 10 k, got n={n} k={k} d={d} seeds={seeds}")
    samples = [make_sample(f"{family}-n{n}-k{k}-d{d}-seed{s}", synthetic(n, k, d, s, shift, family),
                           {"family": family, "seed": s}) for s in range(seed, seed + seeds)]
    return _task(samples, {"n": n, "k": k, "d": d, "shift": shift, "family": family, "seed": seed, "seeds": seeds})


@task("omt_digits", description="Label transfer on scikit-learn digits under a pixel/contrast domain shift",
      family="transport")
def omt_digits(seed: int = 0, components: int = 16) -> Task:
    from harness.tasks.transport.data import digits

    seed, components = int(seed), int(components)
    if not 2 <= components <= 64:
        raise ValueError(f"components must be between 2 and 64, got {components}")
    return _task([make_sample(f"digits-seed{seed}-pc{components}", digits(seed, components), {"data": "digits"})],
                 {"seed": seed, "components": components})


@task("omt_pbmc", description="Cell-type label transfer on scanpy's pbmc68k_reduced under a batch shift",
      family="transport")
def omt_pbmc(seed: int = 0, components: int = 20) -> Task:
    from harness.tasks.transport.data import pbmc

    seed, components = int(seed), int(components)
    if not 2 <= components <= 50:
        raise ValueError(f"components must be between 2 and 50, got {components}")
    return _task([make_sample(f"pbmc-seed{seed}-pc{components}", pbmc(seed, components), {"data": "pbmc"})],
                 {"seed": seed, "components": components})
