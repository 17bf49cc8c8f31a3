"""LongShOTAgent (longshot-agent): preprocessing cost per minute of video and the loop's cost per question.

A generated video (grey frames, mp2 audio) carries espeak-ng speech: one sentence "the code word of
part K is WORD" every ``--gap`` seconds. Preprocessing runs for real (faster-whisper tiny.en,
signal audio events, MiniLM embeddings into FAISS), with the scripted OpenAI-compatible server as
the vision model (captions) and as a controller that searches, refines the best speech hit and
answers with what it heard. Reported: seconds per minute of video of each preprocessing stage
(cold cache), and per question the controller calls, tool calls, inner calls and tokens, whether
the spoken word reached the answer and whether the refined segment covers the sentence. Baseline:
the "everything in context" prompt (whole transcript + every caption) a single call would need,
beside the agent's controller input tokens (ratio).

    python bench/longshot_agent.py --minutes 3 --gap 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
WORDS = ["pineapple", "volcano", "lantern", "harbor", "meadow", "saxophone", "glacier", "compass", "orchid",
         "tornado", "marble", "falcon"]
PLACES = ["kitchen", "garden", "garage", "library", "attic", "basement", "office", "bakery", "station", "museum",
          "bridge", "tower"]
PAPER = [("LongShOTAgent (paper)", "66.64"), ("Qwen3-Omni 30B (best open model, paper)", "64.05"),
         ("Gemini 3.1 Pro (best closed API, paper)", "55.63")]


def speech_track(root: Path, minutes: float, gap: float) -> tuple[Path, list[tuple[float, float, str]]]:
    from harness.tasks.longshot import synth

    rate = 22050
    track = np.zeros(int(minutes * 60 * rate), np.int16)
    facts = []
    t, k = 2.0, 0
    while t + 5 < minutes * 60:
        word = WORDS[k % len(WORDS)]
        place = PLACES[k % len(PLACES)]
        wav = synth.espeak_wav(f"The code word for the {place} is {word}.", root / f"s{k}.wav")
        if wav is None:
            sys.exit("espeak-ng is not installed")
        with wave.open(str(wav), "rb") as w:
            assert w.getframerate() == rate and w.getsampwidth() == 2
            pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16)
        lo = int(t * rate)
        track[lo : lo + len(pcm)] = pcm[: len(track) - lo]
        facts.append((t, t + len(pcm) / rate, word))
        t += gap
        k += 1
    path = root / "speech.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(track.tobytes())
    return path, facts


def controller(body: dict) -> str:
    from openai_server import last_user_text

    turns = [m for m in body["messages"] if m["role"] == "user" and "<tool_response>" in m["content"]]
    question = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if not turns:
        args = {"query": question, "modality": ["audio", "visual"], "max_results": 3}
        return f'<tool_call>{json.dumps({"name": "search_video", "arguments": args})}</tool_call>'
    results = [json.loads(b)["content"] for b in re.findall(r"<tool_response>\n(.*?)\n</tool_response>",
                                                            last_user_text(body), re.DOTALL)]
    if len(turns) == 1:
        hits = [h for h in results[0]["result"]["results"].get("audio", []) if h.get("source") == "speech"]
        best = hits[0] if hits else {"start_sec": 0, "end_sec": 10}
        call = {"name": "refine_video", "arguments": {"start_time": best["start_sec"], "end_time": best["end_sec"],
                                                      "modality": "audio", "query": question}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"
    heard = [r["result"]["transcription"] for r in results if r.get("success")]
    return "I heard: " + " ".join(heard)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--gap", type=float, default=20.0, help="seconds between spoken sentences")
    ap.add_argument("--caption-every", type=float, default=10.0)
    ap.add_argument("--questions", type=int, default=6)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    tmp = Path(tempfile.mkdtemp(prefix="longshot-agent-bench-"))
    os.environ["HARNESS_CACHE_DIR"] = str(tmp / "cache")  # a cold cache: every stage is measured

    from openai_server import ScriptedServer, last_user_text

    from harness.modelspec import build_model
    from harness.tasks.longshot import synth
    from harness.tasks.longshot.agent import preprocess
    from harness.types import GenerationConfig, Message, Part, Request

    wav, facts = speech_track(tmp, args.minutes, args.gap)
    video = synth.write_video(tmp / "bench.mp4", seconds=args.minutes * 60, fps=2, speech_wav=wav,
                              audio_rate=22050, audio_codec="mp2")

    def reply(body: dict) -> str:
        if body.get("model") == "ctrl":
            return controller(body)
        return "A flat grey screen." if preprocess.CAPTION_PROMPT in last_user_text(body) else "Grey frames."

    # models loaded before the clock starts: the stage timings are processing, the loads reported apart
    import time

    from harness.tasks.longshot.agent import asr, index

    t0 = time.perf_counter()
    asr.load_model(str(asr.default_model_path()), 1)
    t1 = time.perf_counter()
    index.default_embed(["warm up"])
    loads = (t1 - t0, time.perf_counter() - t1)
    with ScriptedServer(reply) as srv:
        agent = build_model("longshot-agent:default", {
            "controller": "openai:ctrl", "controller_settings": {"base_url": srv.base_url},
            "vision": "openai:vlm", "vision_settings": {"base_url": srv.base_url},
            "caption_every": args.caption_every})
        picked = facts[: args.questions]
        questions = [f"What is the code word for the {PLACES[i % len(PLACES)]}?" for i in range(len(picked))]
        requests = [Request([Message("user", [Part("video", path=str(video)), Part("text", q)])],
                            GenerationConfig(temperature=0.1, max_tokens=4096)) for q in questions]

        async def ask_all() -> list:
            got = []
            for r in requests:  # one at a time: the first pays for preprocessing, the others reuse it
                got.extend(await agent.generate([r]))
            await agent.aclose()
            return got

        outs = asyncio.run(ask_all())
    pre = outs[0].details["preprocess"]
    minutes = pre["video_seconds"] / 60
    print(f"video: {minutes:.2f} min, {len(facts)} spoken sentences, captions every {args.caption_every:g} s")
    print("\n| preprocessing stage | seconds | seconds per minute of video |\n|---|---|---|")
    total = 0.0
    for stage in ("asr", "events", "frames", "embed"):
        s = float(pre["seconds"][stage])
        total += s
        print(f"| {stage} | {s:.2f} | {s / minutes:.2f} |")
    print(f"| total | {total:.2f} | {total / minutes:.2f} |")
    print(f"chunks: {pre['chunks']}; ASR failures: {len(pre['asr_failures'])}; model loads (once per process): "
          f"speech {loads[0]:.1f} s, embedder {loads[1]:.1f} s")
    if os.environ.get("BENCH_VERBOSE"):
        for out in outs:
            print(repr(out.text))

    # the single-call baseline: every indexed text (transcript, audio events, captions) in one prompt
    index_dir = next((tmp / "cache" / "media").glob("*/agent-index-*"))
    chunks = json.loads((index_dir / "chunks.json").read_text())
    full_context = sum(len(c["text"].split()) for c in chunks) + 40  # + the question and instructions

    print("\n| question | controller calls | tool calls | inner calls | input tokens | output tokens | "
          "controller input / full-context prompt | word in answer | refined the right segment |")
    print("|---|---|---|---|---|---|---|---|---|")
    agg = np.zeros(5)
    n_right = n_hit = 0
    for k, ((start, end, word), out) in enumerate(zip(picked, outs, strict=True)):
        d = out.details
        ctrl_in = d["usage_split"]["controller"]["input_tokens"]
        right = word in out.text.lower()
        hit = any(s["start"] < end and s["end"] > start for s in d["retrieved_segments"] if s["via"] == "refine_video")
        n_right += right
        n_hit += hit
        u = out.usage
        calls = u.calls - d["usage_split"]["preprocess"]["calls"]
        pre_u = d["usage_split"]["preprocess"]
        row = [d["controller_calls"], d["tool_calls"], calls, u.input_tokens - pre_u["input_tokens"],
               u.output_tokens - pre_u["output_tokens"]]
        agg += row
        print(f"| {PLACES[k % len(PLACES)]} | {row[0]} | {row[1]} | {row[2]} | {row[3]} | {row[4]} | "
              f"{ctrl_in / full_context:.2f} | {right} | {hit} |")
    n = len(outs)
    print(f"| mean | {agg[0] / n:.1f} | {agg[1] / n:.1f} | {agg[2] / n:.1f} | {agg[3] / n:.0f} | {agg[4] / n:.0f} | "
          f"| {n_right}/{n} | {n_hit}/{n} |")
    print(f"full-context prompt: ~{full_context} words for this {minutes:.1f}-minute video")
    print("\n| model | LongShOTBench overall (%) |\n|---|---|")
    for name, value in PAPER:
        print(f"| {name} | {value} |")
    print("| longshot-agent here | not measured: needs the released dataset, its videos and real models |")


if __name__ == "__main__":
    main()
