"""Audio events from the signal itself: silence, steady tones, speech and other sound, per window.

No audio-tagging model ships offline (the reference's audio specialist is Audio Flamingo 3, which a
user with the weights plugs in as ``audio=SPEC``), so the index gets what plain signal measures
tell reliably: loudness (RMS in dBFS), whether one frequency dominates the spectrum (a tone, a
beep, a hum: its pitch is given), and whether the speech recogniser found speech in the window.
Consecutive windows with the same label are merged into one event.
"""

from __future__ import annotations

from typing import Any

SILENCE_DBFS = -50.0  # quieter than this is silence
TONAL_SHARE = 0.5  # a tone: at least this share of the spectral energy within +-3% of the peak


def _label(window: Any, rate: int, speech: bool) -> tuple[str, float | None, float]:
    import numpy as np

    rms = float(np.sqrt(np.mean(np.square(window, dtype=np.float64)))) if len(window) else 0.0
    dbfs = 20 * np.log10(max(rms, 1e-10))
    if dbfs < SILENCE_DBFS:
        return "silence", None, dbfs
    spectrum = np.abs(np.fft.rfft(window * np.hanning(len(window)))) ** 2
    freqs = np.fft.rfftfreq(len(window), 1 / rate)
    spectrum[freqs < 40] = 0.0  # DC and rumble
    total = float(spectrum.sum())
    if total <= 0:
        return "silence", None, dbfs
    peak = float(freqs[int(np.argmax(spectrum))])
    share = float(spectrum[(freqs >= peak * 0.97) & (freqs <= peak * 1.03)].sum()) / total
    if share >= TONAL_SHARE:
        return "tone", peak, dbfs
    return ("speech" if speech else "sound"), None, dbfs


def _describe(label: str, pitch: float | None, dbfs: float) -> str:
    loud = "loud" if dbfs > -20 else "moderate" if dbfs > -35 else "quiet"
    if label == "silence":
        return "audio event: silence"
    if label == "tone":
        return f"audio event: steady tone (beep or hum) at about {pitch:.0f} Hz, {loud}"
    if label == "speech":
        return f"audio event: speech, {loud}"
    return f"audio event: non-speech sound (noise, music or ambience), {loud}"


def detect(audio: Any, rate: int, speech_spans: list[tuple[float, float]],
           window_s: float = 5.0) -> list[dict[str, Any]]:
    """[{"start", "end", "label", "text", "dbfs", "pitch_hz"}] over the whole track."""
    step = max(1, int(window_s * rate))
    events: list[dict[str, Any]] = []
    for lo in range(0, len(audio), step):
        start, end = lo / rate, min(len(audio), lo + step) / rate
        speech = any(s < end and e > start for s, e in speech_spans)
        label, pitch, dbfs = _label(audio[lo : lo + step], rate, speech)
        pitch_r = None if pitch is None else round(pitch / 10) * 10  # so neighbouring windows merge
        last = events[-1] if events else None
        if last is not None and last["label"] == label and last["pitch_hz"] == pitch_r:
            last["end"] = round(end, 3)
            last["dbfs"] = round(max(last["dbfs"], dbfs), 1)
            last["text"] = _describe(label, pitch_r, last["dbfs"])
            continue
        events.append({"start": round(start, 3), "end": round(end, 3), "label": label, "pitch_hz": pitch_r,
                       "dbfs": round(dbfs, 1), "text": _describe(label, pitch_r, dbfs)})
    return events
