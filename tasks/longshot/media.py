"""Decode, sample and cache the media of long videos (PyAV, which bundles FFmpeg).

This is the decode/sample/cache layer of LongShOTBench: it turns ``<video_id>.mp4`` into the parts
a backend takes (sampled JPEG frames with their timestamps, a resampled mono WAV of the audio
track). Everything decoded is cached on disk under ``$HARNESS_CACHE_DIR/media/<video key>/`` so a
video shared by many questions is decoded once per setting, also across runs and processes.

Frame sampling: ``count`` frames at the centres of ``count`` equal segments of the video, or one
frame every ``1/fps`` seconds from t=0; either way at most ``max_frames`` (an fps plan above the
cap is thinned uniformly). A frame for time t is the first decoded frame whose presentation time
is >= t - half a frame interval. Sparse targets are reached by seeking to the preceding keyframe
(cost ~ one GOP per frame) instead of decoding the whole file, which is what makes 32 frames of a
40-minute video cheap; dense targets (gap under ``SEEK_MIN_GAP_S``) just decode forward.
"""

from __future__ import annotations

import fractions
import hashlib
import json
import math
import os
import shutil
import tempfile
import wave
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SEEK_MIN_GAP_S = 5.0  # closer targets are cheaper to reach by decoding forward than by seeking
DEFAULT_AUDIO_RATE = 16000  # what Whisper-style audio encoders (Qwen-Omni, MiniCPM-o) take
CACHE_VERSION = "1"


class MediaError(RuntimeError):
    """A video that cannot be used: missing file, no video stream, undecodable."""


def cache_root() -> Path:
    base = os.environ.get("HARNESS_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "harness")
    return Path(base) / "media"


@dataclass(slots=True)
class VideoInfo:
    duration: float  # seconds
    fps: float
    width: int
    height: int
    n_frames: int  # as the container states it (0 if unknown)
    has_audio: bool
    audio_rate: int = 0
    audio_channels: int = 0


@dataclass(slots=True)
class FrameRef:
    path: str
    time: float  # presentation time of the decoded frame, seconds
    target: float  # the time that was asked for


@dataclass(slots=True)
class SampledFrames:
    frames: list[FrameRef]
    width: int
    height: int
    info: VideoInfo
    plan: dict[str, Any] = field(default_factory=dict)


def probe(path: str | Path) -> VideoInfo:
    import av

    try:
        with av.open(str(path)) as c:
            if not c.streams.video:
                raise MediaError(f"{path}: no video stream")
            vs = c.streams.video[0]
            if vs.duration is not None and vs.time_base is not None:
                duration = float(vs.duration * vs.time_base)
            elif c.duration is not None:
                duration = c.duration / 1_000_000
            else:
                duration = 0.0
            rate = float(vs.average_rate or vs.guessed_rate or 0)
            aud = c.streams.audio[0] if c.streams.audio else None
            return VideoInfo(
                duration=duration, fps=rate, width=vs.codec_context.width, height=vs.codec_context.height,
                n_frames=int(vs.frames or 0), has_audio=aud is not None,
                audio_rate=int(aud.rate or 0) if aud else 0, audio_channels=int(aud.channels or 0) if aud else 0,
            )
    except av.error.FFmpegError as exc:
        raise MediaError(f"{path}: cannot open ({exc})") from None


def sample_times(duration: float, *, count: int | None = None, fps: float | None = None,
                 max_frames: int = 32) -> list[float]:
    """Target timestamps (seconds). ``count`` wins over ``fps``; the cap always applies."""
    if duration <= 0:
        return [0.0]
    if count is None and fps is None:
        count = max_frames
    if count is not None:
        n = max(1, min(int(count), max_frames))
        step = duration / n
        return [step * (i + 0.5) for i in range(n)]
    assert fps is not None and fps > 0
    n_all = max(1, int(math.floor(duration * fps + 1e-9)))
    times = [i / fps for i in range(n_all)]
    if n_all > max_frames:  # thin uniformly to the cap, keeping the first frame
        times = [times[int(i * n_all / max_frames)] for i in range(max_frames)]
    return times


def _scaled_size(width: int, height: int, max_side: int | None) -> tuple[int, int]:
    if not max_side or max(width, height) <= max_side:
        w, h = width, height
    else:
        s = max_side / max(width, height)
        w, h = round(width * s), round(height * s)
    return max(2, w - w % 2), max(2, h - h % 2)  # yuvj420p wants even sizes


class JpegEncoder:
    """JPEG-encode decoded frames with FFmpeg's mjpeg encoder (no Pillow needed). mjpeg is
    intra-only with no delay, so one opened encoder serves every frame of a video."""

    def __init__(self, width: int, height: int, quality: int = 3) -> None:
        import av

        self.width, self.height = width, height
        self.cc = av.CodecContext.create("mjpeg", "w")
        self.cc.width, self.cc.height, self.cc.pix_fmt = width, height, "yuvj420p"
        self.cc.time_base = fractions.Fraction(1, 25)
        self.cc.options = {"qmin": str(quality), "qmax": str(quality)}
        self.n = 0  # the encoder wants strictly increasing pts

    def encode(self, frame: Any) -> bytes:
        out = frame.reformat(width=self.width, height=self.height, format="yuvj420p")
        out.pts, out.time_base = self.n, self.cc.time_base
        self.n += 1
        return b"".join(bytes(p) for p in self.cc.encode(out))


def decode_at(path: str | Path, times: list[float], *, seek: bool = True) -> list[tuple[float, Any]]:
    """Decode the frame shown at each target time; returns [(frame time, av.VideoFrame)].

    ``seek=False`` decodes every frame from the start (the naive baseline of bench/video_decode.py).
    """
    import av

    out: list[tuple[float, Any]] = []
    with av.open(str(path)) as c:
        vs = c.streams.video[0]
        vs.thread_type = "AUTO"
        assert vs.time_base is not None  # set on every demuxed stream
        tb = float(vs.time_base)
        half = 0.5 / float(vs.average_rate or 25)
        start = float(vs.start_time * vs.time_base) if vs.start_time is not None else 0.0
        targets = sorted(range(len(times)), key=lambda i: times[i])
        found: dict[int, tuple[float, Any]] = {}
        frames = None
        pos = -math.inf  # time of the last decoded frame
        last: tuple[float, Any] | None = None
        for i in targets:
            t = times[i]
            if seek and (frames is None or t - pos > SEEK_MIN_GAP_S):
                c.seek(int((t + start) / tb), stream=vs, backward=True, any_frame=False)
                frames = c.decode(vs)
            elif frames is None:
                frames = c.decode(vs)
            if last is not None and last[0] >= t - half:
                found[i] = last  # the frame already decoded covers this target too
                continue
            for fr in frames:
                ft = (fr.pts * tb if fr.pts is not None else fr.time or 0.0) - start
                pos = ft
                last = (ft, fr)
                if ft >= t - half:
                    found[i] = last
                    break
            else:  # past the end: the last frame stands for targets beyond it
                if last is None:
                    raise MediaError(f"{path}: no decodable frames")
                found[i] = last
                frames = iter(())
        for i in range(len(times)):
            out.append(found[i])
    return out


def video_key(path: str | Path) -> str:
    """Cache key of a video file: its absolute path, size and mtime (cheap, no full read)."""
    p = Path(path).resolve()
    st = p.stat()
    raw = f"{CACHE_VERSION}|{p}|{st.st_size}|{st.st_mtime_ns}"
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def _publish(tmp: Path, final: Path) -> None:
    """Atomically move a finished cache entry into place (a concurrent writer may have won)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(tmp, final)
    except OSError:
        if not final.exists():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


_MEMO: dict[tuple[Any, ...], Any] = {}


def sampled_frames(path: str | Path, *, count: int | None = None, fps: float | None = None,
                   max_frames: int = 32, max_side: int | None = 448,
                   cache_dir: Path | None = None) -> SampledFrames:
    """Sample frames of a video as JPEG files (cached on disk and in memory)."""
    path = Path(path)
    if not path.is_file():
        raise MediaError(f"{path}: video file not found")
    plan = {"count": count, "fps": fps, "max_frames": max_frames, "max_side": max_side}
    key = video_key(path)
    memo_key = ("frames", key, json.dumps(plan, sort_keys=True), str(cache_dir))
    if memo_key in _MEMO:
        return _MEMO[memo_key]
    tag = hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()[:12]
    final = (cache_dir or cache_root()) / key / f"frames-{tag}"
    index = final / "index.json"
    if not index.exists():
        info = probe(path)
        width, height = _scaled_size(info.width, info.height, max_side)
        times = sample_times(info.duration, count=count, fps=fps, max_frames=max_frames)
        decoded = decode_at(path, times)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
        entries = []
        encoder = JpegEncoder(width, height)
        for k, ((ft, fr), target) in enumerate(zip(decoded, times, strict=True)):
            name = f"{k:06d}.jpg"
            (tmp / name).write_bytes(encoder.encode(fr))
            entries.append({"file": name, "time": round(ft, 6), "target": round(target, 6)})
        meta = {"video": str(path.resolve()), "plan": plan, "width": width, "height": height,
                "info": asdict(info), "frames": entries}
        (tmp / "index.json").write_text(json.dumps(meta, indent=1))
        _publish(tmp, final)
    meta = json.loads(index.read_text())
    result = SampledFrames(
        frames=[FrameRef(str(final / e["file"]), e["time"], e["target"]) for e in meta["frames"]],
        width=meta["width"], height=meta["height"], info=VideoInfo(**meta["info"]), plan=plan,
    )
    _MEMO[memo_key] = result
    return result


def extract_audio(path: str | Path, *, sample_rate: int = DEFAULT_AUDIO_RATE, mono: bool = True,
                  cache_dir: Path | None = None) -> Path | None:
    """The audio track resampled to ``sample_rate`` as a 16-bit PCM WAV; None if there is none."""
    path = Path(path)
    if not path.is_file():
        raise MediaError(f"{path}: video file not found")
    key = video_key(path)
    memo_key = ("audio", key, sample_rate, mono, str(cache_dir))
    if memo_key in _MEMO:
        return _MEMO[memo_key]
    final = (cache_dir or cache_root()) / key / f"audio-{sample_rate}-{'mono' if mono else 'stereo'}"
    wav_path = final / "audio.wav"
    none_marker = final / "NO_AUDIO"
    if not final.exists():
        import av
        import numpy as np

        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
        with av.open(str(path)) as c:
            if not c.streams.audio:
                none_marker_tmp = tmp / "NO_AUDIO"
                none_marker_tmp.write_text("this video has no audio stream\n")
            else:
                layout = "mono" if mono else "stereo"
                resampler = av.AudioResampler(format="s16", layout=layout, rate=sample_rate)
                chunks = []
                for fr in c.decode(c.streams.audio[0]):
                    for out in resampler.resample(fr):
                        chunks.append(out.to_ndarray())
                for out in resampler.resample(None):  # flush the resampler's delay line
                    chunks.append(out.to_ndarray())
                # packed s16: shape (1, samples * channels), interleaved
                pcm = np.concatenate(chunks, axis=1) if chunks else np.zeros((1, 0), np.int16)
                with wave.open(str(tmp / "audio.wav"), "wb") as w:
                    w.setnchannels(1 if mono else 2)
                    w.setsampwidth(2)
                    w.setframerate(sample_rate)
                    w.writeframes(pcm.astype(np.int16).tobytes())
        _publish(tmp, final)
    result = None if none_marker.exists() else wav_path
    _MEMO[memo_key] = result
    return result
