"""``harness reid build -T ids=40 -T seed=0 ...``: render and cache the synthetic aerial-ground set."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(help="Cross-view ReID: build the synthetic aerial-ground set", no_args_is_help=True)


@app.callback()
def main() -> None:
    """Cross-view re-identification (3D-VITAL): tools of the reid family."""  # keeps `build` a subcommand


@app.command("build")
def build_cmd(
    option: Annotated[list[str] | None, typer.Option("-T", "--task-option", help="KEY=VALUE, as in eval")] = None,
    force: Annotated[bool, typer.Option(help="Render again even if cached")] = False,
) -> None:
    """Render the set ``reid_aerial_ground -T ...`` uses (protocol and distance do not change it)."""
    from harness.tasks.reid.synth import BlenderUnavailable, SynthConfig, build, load_manifest

    kw: dict[str, object] = {}
    for item in option or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"-T {item!r} is not KEY=VALUE")
        kw[key.strip()] = value.strip()
    for ignored in ("protocol", "distance", "data"):
        kw.pop(ignored, None)
    fields = SynthConfig.__dataclass_fields__
    unknown = [k for k in kw if k not in fields]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], list(fields), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise typer.BadParameter(f"unknown option {unknown[0]!r}{hint}")
    try:
        defaults = SynthConfig()
        cfg = SynthConfig(**{k: type(getattr(defaults, k))(v) for k, v in kw.items()})  # type: ignore[arg-type]
        root = build(cfg, force=force)
    except (ValueError, BlenderUnavailable, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    man = load_manifest(root)
    typer.echo(f"{root}: {len(man['images'])} images of {cfg.ids} identities; {man['render']['renders']} renders in "
               f"{man['render']['seconds']} s")
