"""``select_digits_noisy``: online data selection on scikit-learn's digits with label noise.

Data: the bundled digits (8x8, 1797 images) split once, stratified (``train_test_split(test_size=0.25,
random_state=split_seed)``: 1347 / 450). A share ``-T noise`` (0.3) of the train labels is replaced by
a different class drawn uniformly (seed ``noise_seed``); the test labels stay clean. A backend trains
on the noisy train split with online selection under a fixed budget and answers the test images.

Per sample: ``accuracy`` (clean test label); the training record adds ``budget_used`` (samples
trained on), ``noisy_selected_fraction`` (share of them that were mislabelled: the train noise rate
for a selector blind to noise) and ``selection_seconds_per_step``, the same on every sample.
"""

from __future__ import annotations

from harness.registry import task
from harness.task import ScoreContext, Task
from harness.types import Message, Output, Part, Sample, Score, higher, lower, neutral, stable_hash


def _samples(noise: float, split_seed: int, noise_seed: int) -> tuple[list[Sample], list[Sample]]:
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    idx = np.arange(len(d.target))
    tr, te = train_test_split(idx, test_size=0.25, random_state=split_seed, stratify=d.target)
    rng = np.random.default_rng(noise_seed)
    flip = rng.random(len(tr)) < noise
    shift = rng.integers(1, 10, len(tr))

    def sample(i: int, label: int, noisy: bool, prefix: str) -> Sample:
        feats = (d.data[i] / 16.0).round(4).tolist()
        text = "Classify this 8x8 digit (0-9): " + " ".join(f"{v:g}" for v in feats)
        return Sample(f"{prefix}{i}", [Message("user", [Part("text", text, options={"features": feats})])],
                      target=int(label), metadata={"noisy": bool(noisy), "clean_label": int(d.target[i])})

    train = [sample(int(i), (int(d.target[i]) + int(s)) % 10 if f else int(d.target[i]), bool(f), "train")
             for i, f, s in zip(tr, flip, shift, strict=True)]
    test = [sample(int(i), int(d.target[i]), False, "digit") for i in sorted(te)]
    return train, test


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    pred = output.prediction
    if not isinstance(pred, dict) or "class" not in pred:
        digits = [c for c in (output.text or "") if c.isdigit()]
        if not digits:
            return Score.not_scored("no class in the reply")
        pred = {"class": int(digits[-1])}
    values = {"accuracy": float(int(pred["class"]) == int(sample.target))}
    for key in ("budget_used", "noisy_selected_fraction", "selection_seconds_per_step"):
        if key in pred:
            values[key] = float(pred[key])
    return Score(values=values, answer=str(pred["class"]))


@task("select_digits_noisy", description="Online data selection on digits with label noise: test accuracy at a "
      "fixed budget, share of mislabelled samples selected", family="selection")
def select_digits_noisy(noise: float = 0.3, split_seed: int = 0, noise_seed: int = 0) -> Task:
    noise, split_seed, noise_seed = float(noise), int(split_seed), int(noise_seed)
    if not 0.0 <= noise < 0.9:
        raise ValueError(f"noise must be in [0, 0.9), got {noise}")
    cache: dict[str, tuple[list[Sample], list[Sample]]] = {}

    def split() -> tuple[list[Sample], list[Sample]]:
        if "s" not in cache:
            cache["s"] = _samples(noise, split_seed, noise_seed)
        return cache["s"]

    options = {"noise": noise, "split_seed": split_seed, "noise_seed": noise_seed}
    return Task(version="1", load=lambda: split()[1], train=lambda: split()[0], score=score,
                primary_metric="accuracy",
                metrics={"accuracy": higher("Test accuracy"), "budget_used": neutral("Samples trained on"),
                         "noisy_selected_fraction": lower("Mislabelled share selected"),
                         "selection_seconds_per_step": neutral("Selection seconds / step")},
                content_hash=stable_hash({"task": "select_digits_noisy", **options, "v": 1}), options=options)
