"""``harness spa3d``: generate synthetic physics tracks, train the 3DSPA autoencoder, score files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

spa3d_app = typer.Typer(no_args_is_help=True, help="3DSPA: synthetic physics data, training, realism scores.")



@spa3d_app.command("synth")
def synth_cmd(
    out: Annotated[Path, typer.Option("--out", help="Directory for .npz files and pairs.jsonl")],
    pairs: Annotated[int, typer.Option(help="Matched pairs per violation")] = 25,
    realistic: Annotated[int, typer.Option(help="Extra realistic scenes (training data) under OUT/train")] = 0,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Write matched realistic/violating pairs (and optionally realistic training scenes)."""
    from harness.tasks.spa3d import synth
    from harness.tasks.spa3d.tracks import save_tracks

    manifest = synth.write_pairs(out, synth.pair_set(pairs, seed)) if pairs else None
    for i, tracks in enumerate(synth.realistic_set(realistic, seed + 1)):
        save_tracks(out / "train" / f"{i:05d}.npz", tracks)
    typer.echo(f"pairs manifest: {manifest}; realistic scenes: {realistic}")


@spa3d_app.command("train")
def train_cmd(
    out: Annotated[Path, typer.Option("--out", help="Checkpoint path (resumed if it exists)")],
    train_dir: Annotated[Path | None, typer.Option(help="Realistic .npz tracks (default: synthetic)")] = None,
    videos: Annotated[int, typer.Option(help="Synthetic scenes when no --train-dir")] = 150,
    steps: Annotated[int, typer.Option()] = 1500,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Train the track autoencoder (calibrated on a held-out fifth of the videos) and write a checkpoint
    usable as ``--model spa3d:CHECKPOINT``."""
    from harness.cli_support import fail
    from harness.errors import UserError
    from harness.tasks.spa3d import synth
    from harness.tasks.spa3d.tracks import load_tracks
    from harness.tasks.spa3d.train import TrainConfig, fit_scorer

    data = [load_tracks(p) for p in sorted(train_dir.glob("*.npz"))] if train_dir else synth.realistic_set(videos, 1)
    if not data:
        raise typer.BadParameter(f"{train_dir}: no .npz track files")
    cfg = TrainConfig(steps=steps, seed=seed)
    cfg.model.feature_dim = data[0].feature_dim
    try:
        _, history = fit_scorer(data, cfg, checkpoint=out, log=typer.echo)  # a held-out fifth calibrates
    except UserError as exc:  # an existing --out that is refused or cannot be resumed: one line, exit 2
        fail(str(exc))
    typer.echo(f"{out}: {len(history)} steps, final l1 {history[-1]['l1']:.4f}")


@spa3d_app.command("score")
def score_cmd(
    files: Annotated[list[Path], typer.Argument(help=".npz track files or videos")],
    checkpoint: Annotated[Path, typer.Option("--checkpoint", help="A checkpoint from `harness spa3d train`")],
) -> None:
    """Print the realism (calibrated surprise, or AJ for an uncalibrated checkpoint), AJ and error per file."""
    from harness.cli_support import fail
    from harness.errors import UserError
    from harness.tasks.spa3d.scorer import RealismScorer

    try:
        scorer = RealismScorer.from_checkpoint(checkpoint)
    except (UserError, OSError) as exc:  # a missing, refused or malformed checkpoint: one line, exit 2
        fail(str(exc))
    for f in files:
        try:
            s = scorer.score_path(f)
            typer.echo(f"{f}\trealism={s['realism']:.4f}\taj={s['average_jaccard']:.4f}\terror={s['error']:.4f}"
                       f"\tocc_acc={s['occlusion_accuracy']:.3f}")
        except Exception as exc:  # one bad file never stops the others
            typer.echo(f"{f}\terror: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
