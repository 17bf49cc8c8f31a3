"""select_sft: the GSM8K-style split and its label noise, exact per-sample LoRA gradients, LoRA-only
training within the budget for every selector, and ``harness eval -t select_sft`` storing rows.

Real SmolLM2-135M-Instruct (the embedded model tests/setup.d/20-smollm2.sh converts) with peft
LoRA, kept tiny: a handful of short problems, one or two steps, a pool of three.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import pytest  # noqa: E402
from requirements import require  # noqa: E402

require("peft", "tests/setup.d/89-peft.sh installs it")

import torch  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from harness.tasks.selection.sft_backend import SFTFit, examples  # noqa: E402
from harness.tasks.selection.sft_data import SplitSpec, build_split, clean_solution  # noqa: E402
from harness.tasks.selection.sft_grads import collate, encode, per_sample_grads, per_sample_losses, trainable  # noqa: E402
from harness.tasks.selection.sft_task import select_sft  # noqa: E402
from harness.tasks.selection.sft_trainer import SFTPlan, load_lora, plan_from, train_sft  # noqa: E402
from harness.tasks.selection.trainer import SELECTORS  # noqa: E402

torch.set_num_threads(1)
TINY = {"n_test": 2, "n_dev": 1, "n_train": 6, "max_chars": 250, "max_len": 128}


@pytest.fixture(scope="module")
def split():
    task = select_sft(noise=0.5, **TINY)
    train = list(task.train())
    return examples(train, "train"), examples(train, "dev"), train


@pytest.fixture(scope="module")
def lora():
    return load_lora(SFTPlan(max_len=128, proj=16, device="cpu"))


def test_split_is_disjoint_and_noise_corrupts_only_the_final_answer():
    train, dev, test = build_split(SplitSpec(n_test=8, n_dev=4, n_train=40, noise=0.25, max_chars=300))
    ids = [s.id for s in (*train, *dev, *test)]
    assert len(ids) == len(set(ids)) == 52 and (len(train), len(dev), len(test)) == (40, 4, 8)
    noisy = [s for s in train if s.metadata["noisy"]]
    assert len(noisy) == 10 and not any(s.metadata["noisy"] for s in (*dev, *test))
    for s in train:
        clean = clean_solution(s.metadata["solution"])
        trained = s.metadata["train_solution"]
        assert "<<" not in trained and trained.rpartition("####")[0] == clean.rpartition("####")[0]
        final = trained.rpartition("####")[2].strip()
        assert (final != s.target) == s.metadata["noisy"], (s.id, final, s.target)
    assert build_split(SplitSpec(n_test=8, n_dev=4, n_train=40, noise=0.25, max_chars=300))[0] == train  # seeded


def test_bad_options_are_one_line_errors_before_any_model_loads():
    for bad, match in (({"noise": 0.95}, "noise must be in"), ({"select": 9}, "larger than the pool"),
                       ({"steps": 0}, "steps must be at least 1"), ({"max_chars": 20}, "only 0 problems fit")):
        with pytest.raises(ValueError, match=match) as info:
            select_sft(**bad)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="-M hidden does not apply to select_sft"):
        plan_from({}, "gfv", {"hidden": 8})
    task = select_sft(pool=4, **TINY)
    fit = SFTFit("gfv", {"select": 5})
    assert fit.fit(list(task.train())) == {"error": "fit failed: budget per step select=5 is larger than the pool (4)"}


def test_per_sample_lora_gradients_equal_one_backward_pass_per_sample(split, lora):
    train, _, _ = split
    lm, tok = lora.hf_model.get_base_model(), lora.tokenizer
    with torch.no_grad():  # LoRA B starts at zero (so A's gradient does): give both factors a gradient
        saved = {n: p.clone() for n, p in trainable(lm)}
        for n, p in trainable(lm):
            if "lora_B" in n:
                p.normal_(0.0, 0.02, generator=torch.Generator().manual_seed(1))
    try:
        enc = [encode(tok, e.conversation, e.answer, 128) for e in train[:3]]
        assert len({len(e.input_ids) for e in enc}) > 1  # different lengths: the batch is padded
        losses, grads = per_sample_grads(lm, collate(enc, tok.pad_token_id))
        assert grads.shape == (3, sum(p.numel() for _, p in trainable(lm)))
        for i, e in enumerate(enc):
            lm.zero_grad()
            alone = per_sample_losses(lm, collate([e], tok.pad_token_id))
            alone.sum().backward()
            g = torch.cat([p.grad.reshape(-1) for _, p in trainable(lm)])
            assert float(alone.detach()) == pytest.approx(float(losses[i]), rel=1e-5)
            assert float(g.norm()) > 0 and torch.allclose(grads[i], g, atol=1e-6, rtol=1e-4)
        assert not torch.allclose(grads[0], grads[1])
    finally:
        lm.zero_grad()
        with torch.no_grad():
            for n, p in trainable(lm):
                p.copy_(saved[n])


def test_training_moves_lora_only_and_every_selector_stays_within_budget(split, lora):
    train, dev, _ = split
    lm = lora.hf_model.get_base_model()
    frozen = {n: p for n, p in lm.named_parameters() if not p.requires_grad}
    assert len(frozen) > 200 and all("lora_" not in n for n in frozen)
    probe = {n: frozen[n].detach().clone() for n in list(frozen)[::25]}
    start = {n: p.detach().clone() for n, p in trainable(lm)}
    streams = []
    for method in SELECTORS:
        steps = 2 if method == "gfv" else 1
        plan = SFTPlan(method=method, steps=steps, pool=3, select=1, max_len=128, proj=16, lr=1e-2, device="cpu")
        rec = train_sft(plan, train, dev, hf=lora).record
        streams.append(rec["pools"][:1])
        per_step = 3 if method == "full" else 1
        assert rec["budget_used"] == steps * per_step, method
        for pool, picked in zip(rec["pools"], rec["picks"], strict=True):
            assert len(pool) == 3 and len(picked) == per_step == len(set(picked)) and set(picked) <= set(pool)
        moved = [n for n, p in trainable(lm) if not torch.equal(p, start[n])]
        # one Adam step moves every factor that had a gradient: B always, A only once B is non-zero
        assert any("lora_B" in n for n in moved), method
        if method == "gfv":
            assert any("lora_A" in n for n in moved) and rec["dev_nll"] != rec["dev_nll_base"]
        assert all(torch.equal(frozen[n], v) for n, v in probe.items()), method
        assert 0.0 <= rec["noisy_selected_fraction"] <= 1.0 and rec["selection_seconds_per_step"] > 0
        with torch.no_grad():  # the next selector starts from the same adapters
            for n, p in trainable(lm):
                p.copy_(start[n])
    assert all(s == streams[0] for s in streams)  # one seed, one stream of pools, whoever selects


def test_harness_eval_select_sft_stores_rows_and_a_bad_setting_is_an_error_row(tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    task_opts = [x for k, v in {**TINY, "steps": 1, "pool": 3, "select": 1, "max_new_tokens": 12,
                                "noise": 0.5, "device": "cpu"}.items() for x in ("-T", f"{k}={v}")]
    done = CliRunner().invoke(app, ["eval", "-t", "select_sft", "-m", "datasel:gfv", *task_opts, "--db", db,
                                    "--no-progress"])
    assert done.exit_code == 0, done.output[-2000:]
    bad = CliRunner().invoke(app, ["eval", "-t", "select_sft", "-m", "datasel:random", "-M", "hidden=8", *task_opts,
                                   "--db", db, "--no-progress"])
    engine = create_engine(db)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT r.name, s.sample_id, s.output, s.error, s.scores FROM sample_results s "
                                 "JOIN runs r ON r.id = s.run_id ORDER BY r.id, s.sample_id")).all()
    engine.dispose()
    good = [r for r in rows if "datasel-gfv" in r.name]
    assert len(good) == 2 and all(r.error is None and r.sample_id.startswith("gsm8k-") for r in good)
    for r in good:
        scores = r.scores if isinstance(r.scores, dict) else json.loads(r.scores)
        assert {"exact_match_flexible", "exact_match_strict", "exact_match_numeric"} <= set(scores)
        assert scores["budget_used"] == 1.0 and scores["dev_nll"] > 0 and 0 <= scores["noisy_selected_fraction"] <= 1
    errors = [r for r in rows if "datasel-random" in r.name]
    assert len(errors) == 2 and all("-M hidden does not apply to select_sft" in r.error for r in errors), bad.output
