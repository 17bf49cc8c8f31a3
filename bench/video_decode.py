"""LongShOTBench media and judge throughput, each against a named baseline in the same run.

1. Frames: sampling 32 frames from a long generated video (default 40 min, 64x36, 25 fps, x264
   keyframe every 250 frames, mp2 audio) with the pipeline (seek to the keyframe before each
   target, decode forward) versus the naive baseline that decodes every frame from the start and
   keeps the 32 it needs. Both must return the same frame times. Also: the whole cached step
   (decode + JPEG + write) cold and warm, and extracting + resampling the audio track.
2. Judge: rubric-judge calls/s against the scripted OpenAI-compatible server (tests/openai_server.py,
   each reply delayed ``--judge-delay`` s as a stand-in for model latency) through the project's
   OpenAI-compatible client, for three drivings of the same criteria: serial calls (baseline); the
   task's score() per sample in turn, criteria of a sample in parallel (what one runner worker
   does with a chunk); all samples' score() concurrently (what several workers do); and whole
   runs (one chunk vs ``-M batch_size=1 --concurrency 64``).
3. Prefetch: prompting the questions of 4 cold 5-minute videos in order without (baseline) and
   with 2 background decoding threads.

    python bench/video_decode.py [--minutes 40] [--frames 32] [--judge-samples 40] [--judge-delay 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def long_video(minutes: float) -> Path:
    from harness.tasks.longshot import media, synth

    path = media.cache_root().parent / "bench" / f"longshot_{minutes:g}min_64x36.mp4"
    if not path.exists():
        t0 = time.perf_counter()
        tmp = path.with_suffix(".tmp.mp4")
        synth.write_video(tmp, seconds=minutes * 60, fps=25, width=64, height=36, tone_hz=440.0,
                          audio_rate=16000, audio_codec="mp2", gop=250)
        os.replace(tmp, path)
        print(f"generated {path} in {time.perf_counter() - t0:.1f}s (cached for later runs)")
    return path


def bench_frames(path: Path, n_frames: int) -> None:
    from harness.tasks.longshot import media

    info = media.probe(path)
    times = media.sample_times(info.duration, count=n_frames, max_frames=n_frames)
    print(f"video: {info.duration / 60:.1f} min, {info.width}x{info.height}, {info.fps:g} fps, "
          f"{info.n_frames} frames; sampling {n_frames} frames")
    t0 = time.perf_counter()
    seeked = media.decode_at(path, times, seek=True)
    t_seek = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive = media.decode_at(path, times, seek=False)
    t_naive = time.perf_counter() - t0
    assert [round(t, 4) for t, _ in seeked] == [round(t, 4) for t, _ in naive], "seek and naive disagree"
    print(f"  naive decode-every-frame : {t_naive:7.2f}s  {n_frames / t_naive:8.1f} sampled frames/s "
          f"({info.n_frames / t_naive:,.0f} decoded frames/s)")
    print(f"  pipeline seek+decode     : {t_seek:7.2f}s  {n_frames / t_seek:8.1f} sampled frames/s")
    print(f"  ratio pipeline / naive   : {t_naive / t_seek:.1f}x faster")
    with tempfile.TemporaryDirectory() as cache:
        media._MEMO.clear()
        t0 = time.perf_counter()
        media.sampled_frames(path, count=n_frames, max_frames=n_frames, cache_dir=Path(cache))
        cold = time.perf_counter() - t0
        media._MEMO.clear()
        t0 = time.perf_counter()
        media.sampled_frames(path, count=n_frames, max_frames=n_frames, cache_dir=Path(cache))
        warm = time.perf_counter() - t0
        print(f"  cached step (decode+JPEG+write) cold {cold:.2f}s, warm (disk hit) {warm * 1000:.1f} ms: "
              f"{cold / warm:.0f}x")
        t0 = time.perf_counter()
        media.extract_audio(path, sample_rate=16000, cache_dir=Path(cache))
        t_audio = time.perf_counter() - t0
        print(f"  audio track -> 16 kHz mono WAV: {t_audio:.2f}s ({info.duration / t_audio:.0f}x real time)")


def bench_prefetch(n_videos: int = 4, minutes: float = 5.0) -> None:
    """Prompting the samples of several cold videos (frames + audio) in order: prefetch=0 (each
    video decoded when its first sample is prompted; baseline) versus 2 background threads."""
    import json

    from harness.tasks.longshot import media, synth
    from harness.tasks.longshot.task import longshot

    root = media.cache_root().parent / "bench" / f"prefetch_{n_videos}x{minutes:g}min"
    if not (root / "items.jsonl").exists():
        root.mkdir(parents=True, exist_ok=True)
        for v in range(n_videos):
            synth.write_video(root / f"v{v}.mp4", seconds=minutes * 60, fps=25, width=64, height=36,
                              tone_hz=440.0, audio_rate=16000, audio_codec="mp2", gop=250)
        with (root / "items.jsonl").open("w") as f:
            for v in range(n_videos):
                for q in range(3):
                    f.write(json.dumps({"sample_id": f"v{v}q{q}", "video_id": f"v{v}", "task": "summarization",
                                        "duration": minutes * 60, "conversations": [
                                            {"role": "user", "content": "?", "modalities": ["visual"]},
                                            {"role": "assistant", "content": "!", "criteria": []}]}) + "\n")
    print(f"prompting {n_videos} cold {minutes:g}-min videos x 3 questions (32 frames + 16 kHz audio each):")
    for latency in (0.0, 0.5):  # back to back; and with a model answering each sample in 0.5 s
        took = {}
        for workers in (0, 2):
            with tempfile.TemporaryDirectory() as cache:
                os.environ["HARNESS_CACHE_DIR"] = cache
                media._MEMO.clear()
                task = longshot(data_dir=str(root), media_mode="frames_audio", max_frames=32, prefetch=workers)
                samples = list(task.load())
                t0 = time.perf_counter()
                for s in samples:
                    task.prompt(s)
                    time.sleep(latency)  # the model's turn: decoding threads keep going meanwhile
                took[workers] = time.perf_counter() - t0
        label = "back to back" if not latency else f"{latency:g} s model time per sample"
        print(f"  {label:28s}: prefetch=0 (baseline) {took[0]:.2f}s; prefetch=2 {took[2]:.2f}s "
              f"({took[0] / took[2]:.2f}x)")
    os.environ.pop("HARNESS_CACHE_DIR", None)


def judge_samples(n: int) -> list:
    from harness.tasks.longshot import items

    out = []
    for i in range(n):
        crit = [{"name": f"c{k}", "description": f"The response mentions 'fact{k}'.", "category": "accuracy",
                 "weight": w, "is_penalty": w < 0} for k, w in enumerate((5, 3, 1, -5))]
        item = {"sample_id": f"b{i}", "video_id": "v", "task": "summarization", "duration": 600.0,
                "conversations": [{"role": "user", "content": f"Question {i}?", "modalities": ["visual"]},
                                  {"role": "assistant", "content": f"Reference answer {i}.", "criteria": crit}]}
        out += items.item_samples(item, f"bench[{i}]")
    return out


async def bench_judge(n_samples: int, delay: float) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from openai_server import ScriptedServer

    from harness.judge import judge
    from harness.modelspec import build_model
    from harness.task import ScoreContext
    from harness.tasks.longshot import rubric
    from harness.tasks.longshot.task import longshot
    from harness.types import Output

    server = ScriptedServer('{"criteria_met": true}', delay=delay, record=False).start()
    try:
        client = build_model("openai:Qwen/Qwen3-14B", {"base_url": server.base_url, "concurrency": 256})
        ctx = ScoreContext(judge=client, judge_spec="bench")
        task = longshot(data_file=str(ROOT / "bench" / "video_decode.py"))  # data unused: samples built here
        samples = judge_samples(n_samples)
        reply = Output(text="A reply that mentions fact0 and fact1.")
        n_calls = sum(len(s.metadata["criteria"]) for s in samples)
        print(f"judge: {len(samples)} samples x 4 criteria = {n_calls} calls, server delay {delay * 1000:.0f} ms")

        t0 = time.perf_counter()
        for s in samples:
            for c in s.metadata["criteria"]:
                await judge(ctx, rubric.judge_messages(str(s.target), reply.text, c["description"]),
                            rubric.parse_verdict, retries=2, config=rubric.JUDGE_CONFIG)
        serial = time.perf_counter() - t0
        t0 = time.perf_counter()
        for s in samples:
            await task.score(s, reply, ctx)
        per_sample = time.perf_counter() - t0
        gate = asyncio.Semaphore(64)

        async def one(s):  # type: ignore[no-untyped-def]
            async with gate:
                return await task.score(s, reply, ctx)

        t0 = time.perf_counter()
        scores = await asyncio.gather(*(one(s) for s in samples))
        concurrent = time.perf_counter() - t0
        assert all(sc.values["earned"] == 9.0 for sc in scores)
        print(f"  serial calls (baseline)            : {n_calls / serial:8.1f} calls/s")
        print(f"  score() per sample, criteria x4    : {n_calls / per_sample:8.1f} calls/s "
              f"({serial / per_sample:.1f}x baseline)")
        print(f"  score() over 64 samples at once    : {n_calls / concurrent:8.1f} calls/s "
              f"({serial / concurrent:.1f}x baseline)")
        await runner_rates(client, 4 * len(samples), n_calls / serial)
        close = getattr(client, "aclose", None)
        if close is not None:
            await close()
    finally:
        server.stop()


async def runner_rates(client, n_items: int, serial_rate: float) -> None:  # type: ignore[no-untyped-def]
    """The judge stage inside real runs (builtin:echo candidate, SQLite): one worker with one big
    chunk scores its samples one after another; batch_size=1 with 64 workers scores 64 at once."""
    import json

    from harness.runner import EvalConfig, Runner
    from harness.tasks.longshot import synth

    class BenchRunner(Runner):
        def prepare_judge(self):  # type: ignore[no-untyped-def]
            return client, "bench-judge"

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        synth.write_video(root / "v.mp4", seconds=2.0, fps=5, tone_hz=None)
        with (root / "items.jsonl").open("w") as f:
            for s in judge_samples(n_items):
                item = {k: v for k, v in s.metadata.items() if k in ("sample_id", "video_id", "task", "duration",
                                                                      "conversations")}
                f.write(json.dumps(item) + "\n")
        for label, settings, conc in (("one chunk, 1 worker (default)", {}, None),
                                      ("-M batch_size=1 --concurrency 64", {"batch_size": 1}, 64)):
            cfg = EvalConfig(task="longshot", model="builtin:echo", task_options={"data_dir": tmp,
                             "media_mode": "frames", "max_frames": 2}, model_settings=settings, concurrency=conc,
                             judge="bench-judge", db_url=f"sqlite:///{tmp}/{conc}.db", progress=False)
            t0 = time.perf_counter()
            await BenchRunner(cfg).run_async()
            took = time.perf_counter() - t0
            rate = 4 * n_items / took  # whole run: DB setup, prompts and commits included
            print(f"  runner {n_items} samples, {label:32s}: {rate:8.1f} calls/s ({rate / serial_rate:.1f}x baseline)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=40.0)
    ap.add_argument("--frames", type=int, default=32)
    ap.add_argument("--judge-samples", type=int, default=40)
    ap.add_argument("--judge-delay", type=float, default=0.1)
    ap.add_argument("--skip-judge", action="store_true")
    args = ap.parse_args()
    user_cache = os.environ.get("HARNESS_CACHE_DIR")
    bench_frames(long_video(args.minutes), args.frames)
    bench_prefetch()
    if user_cache:
        os.environ["HARNESS_CACHE_DIR"] = user_cache
    if not args.skip_judge:
        asyncio.run(bench_judge(args.judge_samples, args.judge_delay))


if __name__ == "__main__":
    main()
