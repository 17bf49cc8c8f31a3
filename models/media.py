"""Media helpers for API backends: files -> data URLs, audio -> ``input_audio``, video -> JPEG frames.

Video frames are decoded with PyAV (``av``, which bundles FFmpeg) and encoded to JPEG with FFmpeg's
own ``mjpeg`` encoder, so no Pillow or ffmpeg binary is needed.

Frame sampling (:func:`frame_times`), a choice documented here because papers differ: a clip of
``duration`` seconds gets ``n = min(max_frames, max(1, round(duration * fps)))`` frames (``n =
max_frames`` when no fps is given), taken at the centres of ``n`` equal segments, and each time maps
to the frame on screen at that moment (the last frame whose timestamp is <= the time). Centres rather
than segment starts keep the first and last frames off the often-black clip edges.

Decoding is sequential for short clips and seeks to each time for long ones (> ``SEEK_AFTER_S``),
which keeps hour-long videos to a few keyframe decodes per frame. Results are cached per
(file, mtime, settings) so retries and epochs do not decode twice.
"""

from __future__ import annotations

import base64
import mimetypes
import os
import wave
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

SEEK_AFTER_S = 120.0
URL_PREFIXES = ("http://", "https://", "data:")
_MIME_FALLBACK = {".webp": "image/webp", ".mkv": "video/x-matroska", ".flac": "audio/flac", ".m4a": "audio/mp4"}


class MediaError(ValueError):
    """A media part cannot be read or converted (message names the file)."""


@dataclass(frozen=True, slots=True)
class Frame:
    time: float  # seconds from the start of the clip
    jpeg: bytes

    @property
    def data_url(self) -> str:
        return "data:image/jpeg;base64," + base64.b64encode(self.jpeg).decode("ascii")


def is_url(path: str) -> bool:
    return path.startswith(URL_PREFIXES)


def mime_type(path: str, default: str = "application/octet-stream") -> str:
    suffix = Path(path).suffix.lower()
    return mimetypes.guess_type(path)[0] or _MIME_FALLBACK.get(suffix, default)


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise MediaError(f"cannot read media file {path!r}: {exc.strerror or exc}") from None


def data_url(path: str, mime: str | None = None) -> str:
    """A ``data:`` URL holding the file (URLs are returned unchanged)."""
    if is_url(path):
        return path
    payload = base64.b64encode(_read(path)).decode("ascii")
    return f"data:{mime or mime_type(path)};base64,{payload}"


def image_url(path: str) -> str:
    """What goes in ``image_url.url``: a remote URL as is, a local file as a base64 data URL."""
    if not is_url(path) and not mime_type(path, "").startswith("image/"):
        raise MediaError(f"{path!r} does not look like an image (unknown extension)")
    return data_url(path)


# ---- audio ---------------------------------------------------------------------------------------
def audio_input(path: str, sample_rate: int = 16000) -> dict[str, str]:
    """The ``input_audio`` object: WAV and MP3 go as they are; other formats are decoded with PyAV
    and sent as 16-bit mono WAV at ``sample_rate`` (the two formats the Chat API accepts)."""
    suffix = Path(path).suffix.lower()
    if suffix in (".wav", ".mp3"):
        return {"data": base64.b64encode(_read(path)).decode("ascii"), "format": suffix[1:]}
    return {"data": base64.b64encode(to_wav(path, sample_rate)).decode("ascii"), "format": "wav"}


def to_wav(path: str, sample_rate: int = 16000) -> bytes:
    import io

    import av

    pcm = bytearray()
    try:
        with av.open(path) as container:
            if not container.streams.audio:
                raise MediaError(f"{path!r} has no audio stream")
            resampler = av.AudioResampler(format="s16", layout="mono", rate=sample_rate)
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    pcm += out.to_ndarray().tobytes()
            for out in resampler.resample(None):
                pcm += out.to_ndarray().tobytes()
    except (av.FFmpegError, OSError) as exc:
        raise MediaError(f"cannot decode audio {path!r}: {exc}") from None
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(bytes(pcm))
    return buf.getvalue()


# ---- video ---------------------------------------------------------------------------------------
def frame_times(duration: float, fps: float | None = None, max_frames: int = 32) -> list[float]:
    """Sampling times in seconds (see the module docstring for the rule)."""
    if max_frames < 1:
        raise ValueError("max_frames must be >= 1")
    n = max_frames if not fps else min(max_frames, max(1, round(duration * fps)))
    return [(i + 0.5) * duration / n for i in range(n)]


def encode_jpeg(frame: Any, max_side: int | None = None, quality: int = 3) -> bytes:
    """JPEG bytes of an ``av.VideoFrame``, scaled so its longer side is at most ``max_side``.

    ``quality`` is FFmpeg's qscale (2 best .. 31 worst)."""
    import av

    width, height = frame.width, frame.height
    if max_side and max(width, height) > max_side:
        scale = max_side / max(width, height)
        width, height = max(2, round(width * scale)), max(2, round(height * scale))
    width, height = width - width % 2, height - height % 2  # 4:2:0 needs even sizes
    ctx = av.CodecContext.create("mjpeg", "w")
    ctx.width, ctx.height, ctx.pix_fmt = width, height, "yuvj420p"
    ctx.time_base = Fraction(1, 25)
    ctx.options = {"qmin": str(quality), "qmax": str(quality)}
    image = frame.reformat(width=width, height=height, format="yuvj420p")
    packets = list(ctx.encode(image)) + list(ctx.encode(None))
    return b"".join(bytes(p) for p in packets)


def video_frames(path: str, fps: float | None = None, max_frames: int = 32,
                 max_side: int | None = 768) -> list[Frame]:
    """Sample frames of a local video as JPEGs (cached per file version and settings)."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise MediaError(f"cannot read media file {path!r}: {exc.strerror or exc}") from None
    return list(_video_frames_cached(os.path.abspath(path), stat.st_mtime_ns, stat.st_size,
                                     fps, max_frames, max_side))


@lru_cache(maxsize=16)
def _video_frames_cached(path: str, mtime_ns: int, size: int, fps: float | None, max_frames: int,
                         max_side: int | None) -> tuple[Frame, ...]:
    import av

    try:
        with av.open(path) as container:
            if not container.streams.video:
                raise MediaError(f"{path!r} has no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            duration = _duration(container, stream)
            if duration is None:  # no duration in the headers: decode everything once
                decoded = [f for f in container.decode(stream) if f.time is not None]
                if not decoded:
                    raise MediaError(f"{path!r} has no decodable frames")
                duration = decoded[-1].time + 1e-3
                picked = _pick(iter(decoded), frame_times(duration, fps, max_frames))
            elif duration > SEEK_AFTER_S:
                picked = _pick_by_seeking(container, stream, frame_times(duration, fps, max_frames))
            else:
                picked = _pick(container.decode(stream), frame_times(duration, fps, max_frames))
            return tuple(Frame(t, encode_jpeg(f, max_side)) for t, f in picked)
    except av.FFmpegError as exc:
        raise MediaError(f"cannot decode video {path!r}: {exc}") from None


def _duration(container: Any, stream: Any) -> float | None:
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    if container.duration:
        return container.duration / 1_000_000  # av.time_base is microseconds
    return None


def _pick(frames: Any, times: list[float]) -> list[tuple[float, Any]]:
    """For each time, the last frame whose timestamp is <= it (one pass over the decoded frames)."""
    out: list[tuple[float, Any]] = []
    previous = None
    i = 0
    for frame in frames:
        t = frame.time if frame.time is not None else 0.0
        while i < len(times) and t > times[i]:
            out.append((times[i], previous if previous is not None else frame))
            i += 1
        if i == len(times):
            break
        previous = frame
    while i < len(times) and previous is not None:  # times past the last frame: the last frame
        out.append((times[i], previous))
        i += 1
    return out


def _pick_by_seeking(container: Any, stream: Any, times: list[float]) -> list[tuple[float, Any]]:
    out: list[tuple[float, Any]] = []
    for t in times:
        container.seek(int(t / stream.time_base), stream=stream, backward=True, any_frame=False)
        chosen = None
        for frame in container.decode(stream):
            if frame.time is not None and frame.time > t and chosen is not None:
                break
            chosen = frame
        if chosen is not None:
            out.append((t, chosen))
    return out
