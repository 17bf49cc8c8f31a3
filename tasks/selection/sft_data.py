"""The GSM8K-style split of ``select_sft``, built from the GSM8K problems the gsm8k family ships.

Only GSM8K's test file ships with the project, so the fine-tuning split is carved out of it: rows
whose question plus solution (calculator annotations ``<<...>>`` removed) fit in ``max_chars``
characters are shuffled once (``split_seed``) and cut into ``n_test`` test problems, ``n_dev``
held-out problems (never trained on: their clean solutions measure the fine-tuned model's loss)
and the rest as the train pool (``n_train``: at most that many; 0 keeps all). Numbers on this
split are therefore not GSM8K test-set results.

Label noise (``noise``): that share of the train problems (drawn with ``noise_seed``) gets a wrong
final answer, the last line ``#### N`` replaced by ``#### N+d`` with d a non-zero integer in
[-10, 10] (kept non-negative for a non-negative answer); the worked steps above it stay as they
were, so a noisy sample contradicts itself the way a mislabelled one does.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from harness.numbers import normalise
from harness.tasks.gsm8k.problems import DATA, parse_row, problem_rows  # the gsm8k family's data API
from harness.types import Sample

ANNOTATION = re.compile(r"<<[^>]*>>")


@dataclass(frozen=True)
class SplitSpec:
    max_chars: int = 400
    n_test: int = 32
    n_dev: int = 16
    n_train: int = 0  # 0: every remaining problem
    noise: float = 0.0
    split_seed: int = 0
    noise_seed: int = 0

    def check(self) -> None:
        if not 0.0 <= self.noise < 0.9:
            raise ValueError(f"noise must be in [0, 0.9), got {self.noise}")
        for name in ("max_chars", "n_test", "n_dev"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.n_train < 0:
            raise ValueError(f"n_train must be >= 0 (0: all), got {self.n_train}")


def clean_solution(answer: str) -> str:
    """The solution text the model is trained to write: GSM8K's, calculator annotations removed."""
    return ANNOTATION.sub("", answer).strip()


def corrupt(solution: str, rng: random.Random) -> str:
    """The same solution with a wrong final answer (see the module docstring)."""
    head, _, final = solution.rpartition("####")
    value = normalise(final)
    try:
        number = int(float(value))
    except ValueError:
        number = 0
    d = rng.choice([k for k in range(-10, 11) if k != 0])
    wrong = number + d if number + d >= 0 or number < 0 else number + abs(d)
    return f"{head}#### {wrong}"


def build_split(spec: SplitSpec) -> tuple[list[Sample], list[Sample], list[Sample]]:
    """(train, dev, test) samples. Ids are ``gsm8k-<row>``, the 0-based row of GSM8K's test file."""
    spec.check()
    rows = [(i, row) for i, row in enumerate(problem_rows(DATA))
            if len(str(row.get("question", ""))) + len(clean_solution(str(row.get("answer", "")))) <= spec.max_chars]
    need = spec.n_test + spec.n_dev + 1
    if len(rows) < need:
        raise ValueError(f"only {len(rows)} problems fit in max_chars={spec.max_chars}; "
                         f"n_test + n_dev + 1 = {need} are needed")
    random.Random(spec.split_seed).shuffle(rows)
    test_rows, dev_rows = rows[:spec.n_test], rows[spec.n_test:spec.n_test + spec.n_dev]
    train_rows = rows[spec.n_test + spec.n_dev:]
    if spec.n_train:
        train_rows = train_rows[:spec.n_train]
    noise_rng = random.Random(spec.noise_seed)
    n_noisy = round(spec.noise * len(train_rows))
    noisy = set(noise_rng.sample(range(len(train_rows)), n_noisy))

    def sample(i: int, row: dict, split: str, is_noisy: bool) -> Sample:
        base = parse_row(row, f"{DATA.name}:{i + 1}", i)
        solution = clean_solution(str(row["answer"]))
        trained = corrupt(solution, noise_rng) if is_noisy else solution
        return Sample(id=f"gsm8k-{i}", messages=base.messages, target=base.target,
                      metadata={**base.metadata, "split": split, "noisy": is_noisy, "train_solution": trained})

    test = [sample(i, r, "test", False) for i, r in sorted(test_rows, key=lambda x: x[0])]
    dev = [sample(i, r, "dev", False) for i, r in dev_rows]
    train = [sample(i, r, "train", k in noisy) for k, (i, r) in enumerate(train_rows)]
    return train, dev, test
