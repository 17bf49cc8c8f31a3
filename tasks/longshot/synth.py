"""Generated media for tests and benchmarks: videos whose content is known exactly.

Every frame is a flat grey whose level encodes its index (``gray_level(i)``), so a decoded frame
can be checked against the time it claims; the audio is a pure tone (its frequency is checkable
after resampling) or a speech WAV (e.g. from ``espeak-ng``) muxed in as the audio track.
"""

from __future__ import annotations

import fractions
import shutil
import subprocess
import wave
from pathlib import Path
from typing import cast

import numpy as np


def gray_level(index: int) -> int:
    """The grey level of frame ``index``: steps of 16 so JPEG noise cannot confuse neighbours."""
    return 16 + (index % 14) * 16


def _read_wav(path: Path) -> tuple[np.ndarray, int]:
    with wave.open(str(path), "rb") as w:
        rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
        data = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16 if width == 2 else np.uint8)
    if width != 2:
        data = ((data.astype(np.int16) - 128) << 8).astype(np.int16)
    mono = data.reshape(-1, channels).mean(axis=1) / 32768.0
    return mono.astype(np.float32), rate


def write_video(path: str | Path, *, seconds: float, fps: int = 10, width: int = 64, height: int = 48,
                tone_hz: float | None = 440.0, speech_wav: str | Path | None = None,
                audio_rate: int = 44100, gop: int | None = None, preset: str = "ultrafast",
                audio_codec: str = "aac") -> Path:
    """Write an H.264 MP4. Audio (AAC by default; FFmpeg's AAC encoder runs only ~6x real time here,
    so long benchmark videos use ``mp2``): ``speech_wav`` if given, else a tone (``tone_hz=None``:
    no audio stream)."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n_frames = int(round(seconds * fps))
    audio: np.ndarray | None = None
    if speech_wav is not None:
        speech, rate = _read_wav(Path(speech_wav))
        if rate != audio_rate:  # linear resample: good enough for a fixture's speech track
            t_new = np.arange(int(len(speech) * audio_rate / rate)) / audio_rate
            speech = np.interp(t_new, np.arange(len(speech)) / rate, speech).astype(np.float32)
        audio = np.zeros(int(seconds * audio_rate), np.float32)
        audio[: min(len(audio), len(speech))] = speech[: len(audio)]
    elif tone_hz is not None:
        t = np.arange(int(seconds * audio_rate)) / audio_rate
        audio = (0.3 * np.sin(2 * np.pi * tone_hz * t)).astype(np.float32)

    with av.open(str(path), "w") as c:
        vs = c.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = width, height, "yuv420p"
        opts: dict[str, object] = {"preset": preset, "tune": "zerolatency"}
        if gop:
            opts["g"] = str(gop)
        vs.options = opts
        aus: av.AudioStream | None = None
        if audio is not None:
            aus = cast("av.AudioStream", c.add_stream(audio_codec, rate=audio_rate))  # an audio codec's name
            aus.layout = "stereo"
        # interleave video and audio by time so the muxer does not buffer the whole file
        a_pos = 0
        a_step = (aus.codec_context.frame_size or 1024) if aus is not None else 1024
        plane = np.empty((height, width, 3), np.uint8)
        for i in range(n_frames):
            plane[:] = gray_level(i)
            frame = av.VideoFrame.from_ndarray(plane, format="rgb24")
            frame.pts = i
            frame.time_base = fractions.Fraction(1, fps)
            for pkt in vs.encode(frame):
                c.mux(pkt)
            if aus is not None and audio is not None:
                until = int((i + 1) / fps * audio_rate)
                while a_pos < min(until, len(audio)):
                    chunk = audio[a_pos : a_pos + a_step]
                    stereo = np.stack([chunk, chunk]).reshape(1, -1, order="F")  # packed fltp->flt
                    if audio_codec == "mp2":  # FFmpeg's mp2 encoder takes 16-bit samples only
                        stereo = (stereo * 32767).astype(np.int16)
                        af = av.AudioFrame.from_ndarray(stereo, format="s16", layout="stereo")
                    else:
                        af = av.AudioFrame.from_ndarray(stereo.astype(np.float32), format="flt", layout="stereo")
                    af.sample_rate = audio_rate
                    af.pts = a_pos
                    af.time_base = fractions.Fraction(1, audio_rate)
                    for pkt in aus.encode(af):
                        c.mux(pkt)
                    a_pos += len(chunk)
        for pkt in vs.encode(None):
            c.mux(pkt)
        if aus is not None:
            for pkt in aus.encode(None):
                c.mux(pkt)
    return path


def espeak_wav(text: str, path: str | Path) -> Path | None:
    """Speech from Debian's ``espeak-ng`` (None when it is not installed)."""
    exe = shutil.which("espeak-ng") or shutil.which("espeak")
    if exe is None:
        return None
    path = Path(path)
    subprocess.run([exe, "-w", str(path), text], check=True, capture_output=True, timeout=60)
    return path


def _crit(word: str, weight: int, *, penalty: str | None = None, tag: str = "") -> dict:
    """A criterion the scripted test judge can decide: met iff ``word`` is in the response."""
    name = penalty or f"mentions_{word}"
    return {"name": name, "description": f"The response mentions '{word}'.{tag}",
            "category": "penalty" if penalty else "accuracy", "weight": weight, "is_penalty": penalty is not None}


def fixture_items() -> list[dict]:
    """Items in the released format covering single/multi-turn, penalties, remapped tasks, all three
    modality groups and duration bins, a missing video and a criterion the judge cannot grade."""
    base = {"source_videos": [], "categories": ["test"], "scenario": "fixture", "scenario_id": 0}

    def user(text: str, modalities: list[str]) -> dict:
        return {"role": "user", "content": text, "difficulty": "easy", "modalities": modalities,
                "key_segments": [{"start": 0.0, "end": 2.0}], "conversation_role": "viewer"}

    def answer(text: str, criteria: list[dict]) -> dict:
        return {"role": "assistant", "content": text, "criteria": criteria}

    return [
        {**base, "video_id": "vid_tone", "title": "Tone", "duration": 1500.0, "sample_id": "s1",
         "sample_type": "single_turn", "task": "entity_recognition", "task_id": 1, "criteria_count": 4,
         "conversations": [user("What colour is the car? Mention red and blue.", ["visual"]),
                           answer("The car is red with blue stripes.",
                                  [_crit("red", 5), _crit("blue", 3), _crit("green", 1),
                                   _crit("car", -5, penalty="hallucination")])]},
        {**base, "video_id": "vid_speech", "title": "Speech", "duration": 2000.0, "sample_id": "s2",
         "sample_type": "multi_turn", "task": "speech_transcription", "task_id": 2, "criteria_count": 5,
         "conversations": [user("What does the speaker say? hello", ["speech"]),
                           answer("The speaker says hello world.", [_crit("hello", 5), _crit("world", 3)]),
                           user("And what sound plays? tone", ["audio_environment", "visual"]),
                           answer("A steady tone plays.",
                                  [_crit("tone", 5), _crit("beep", 1),
                                   _crit("speaker", -5, penalty="contradiction")])]},
        {**base, "video_id": "vid_silent", "title": "Silent", "duration": 3000.0, "sample_id": "s3",
         "sample_type": "single_turn", "task": "causal_reasoning", "task_id": 3, "criteria_count": 2,
         "conversations": [user("Why is it silent? because", ["visual"]),
                           answer("Because the audio was muted.",
                                  [_crit("because", 3, tag=" FLAKY"), _crit("muted", 3)])]},
        {**base, "video_id": "vid_missing", "title": "Missing", "duration": 600.0, "sample_id": "s4",
         "sample_type": "single_turn", "task": "ocr_text_extraction", "task_id": 4, "criteria_count": 1,
         "conversations": [user("What text is shown?", ["text_overlay"]),
                           answer("The text says OPEN.", [_crit("OPEN", 5)])]},
        {**base, "video_id": "vid_tone", "title": "Tone", "duration": 1500.0, "sample_id": "s5",
         "sample_type": "single_turn", "task": "question_answering", "task_id": 5, "criteria_count": 1,
         "conversations": [user("Summarise the video.", ["visual"]),
                           answer("A grey screen with a tone.", [_crit("grey", 5, tag=" GARBLE")])]},
    ]


def build_fixture(root: str | Path) -> Path:
    """Write videos (tone / espeak-ng speech or a second tone / silent) and items.jsonl under root."""
    import json

    root = Path(root)
    videos = root / "videos"
    write_video(videos / "vid_tone.mp4", seconds=6.0, fps=10, tone_hz=440.0)
    speech = espeak_wav("hello world, this is a test", root / "speech.wav")
    write_video(videos / "nested" / "vid_speech.mp4", seconds=4.0, fps=10, speech_wav=speech, tone_hz=660.0)
    write_video(videos / "vid_silent.mp4", seconds=3.0, fps=10, tone_hz=None)
    with (root / "items.jsonl").open("w") as f:
        for item in fixture_items():
            f.write(json.dumps(item) + "\n")
    return root
