"""LongShOTBench media pipeline on generated videos: frame times and content, audio, disk cache."""

from __future__ import annotations

import wave

import numpy as np
import pytest
from requirements import missing

from harness.tasks.longshot import media, synth


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("longshot_media")
    return {
        "tone": synth.write_video(root / "tone.mp4", seconds=6.0, fps=10, tone_hz=440.0),
        "silent": synth.write_video(root / "silent.mp4", seconds=3.0, fps=10, tone_hz=None),
        # 60 s at 5 fps with a keyframe every 50 frames (10 s): targets 7.5 s apart -> seek path
        "long": synth.write_video(root / "long.mp4", seconds=60.0, fps=5, tone_hz=None, gop=50),
    }


@pytest.fixture(autouse=True)
def media_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    media._MEMO.clear()
    return tmp_path / "cache" / "media"


def jpeg_gray(path: str) -> float:
    import av

    with av.open(path) as c:
        frame = next(c.decode(video=0))
    return float(frame.to_ndarray(format="gray").mean())


def frame_index_of(gray: float) -> int:
    """Invert synth.gray_level modulo its 14-step cycle."""
    return int(round((gray - 16) / 16)) % 14


def test_probe_reports_duration_fps_and_audio(videos):
    info = media.probe(videos["tone"])
    assert info.duration == pytest.approx(6.0, abs=0.05)
    assert info.fps == pytest.approx(10.0)
    assert (info.width, info.height) == (64, 48)
    assert info.has_audio and info.audio_rate == 44100
    assert not media.probe(videos["silent"]).has_audio


def test_sample_times_count_fps_and_cap():
    assert media.sample_times(10.0, count=4) == pytest.approx([1.25, 3.75, 6.25, 8.75])
    assert media.sample_times(10.0, fps=0.5) == pytest.approx([0, 2, 4, 6, 8])
    capped = media.sample_times(100.0, fps=1.0, max_frames=8)
    assert len(capped) == 8 and capped[0] == 0 and capped == sorted(capped)
    assert len(media.sample_times(10.0, count=50, max_frames=16)) == 16  # the cap wins over count


@pytest.mark.parametrize("kwargs,expected", [
    ({"count": 6}, [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]),
    ({"fps": 2.0, "max_frames": 5}, [0.0, 1.0, 2.0, 3.5, 4.5]),  # 12 on the 2 fps grid, thinned
])
def test_sampled_frames_times_and_content(videos, kwargs, expected):
    sampled = media.sampled_frames(videos["tone"], max_side=None, **kwargs)
    assert [f.target for f in sampled.frames] == pytest.approx(expected)
    for f in sampled.frames:
        assert abs(f.time - f.target) <= 0.05 + 1e-6  # within half a frame interval at 10 fps
        # the pixels are those of the frame shown at that time (grey level encodes the index)
        assert frame_index_of(jpeg_gray(f.path)) == round(f.time * 10) % 14
    assert (sampled.width, sampled.height) == (64, 48)


def test_seeking_far_targets_in_a_long_video(videos):
    sampled = media.sampled_frames(videos["long"], count=8, max_side=32)
    assert len(sampled.frames) == 8 and (sampled.width, sampled.height) == (32, 24)
    for f in sampled.frames:
        assert abs(f.time - f.target) <= 0.1 + 1e-6  # half of 1/5 s
        assert frame_index_of(jpeg_gray(f.path)) == round(f.time * 5) % 14
    naive = media.decode_at(videos["long"], [f.target for f in sampled.frames], seek=False)
    assert [round(t, 3) for t, _ in naive] == [round(f.time, 3) for f in sampled.frames]


def test_audio_extracted_resampled_mono_and_cached(videos, media_cache, monkeypatch):
    wav_path = media.extract_audio(videos["tone"], sample_rate=16000)
    with wave.open(str(wav_path)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
        pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(float)
    assert len(pcm) / 16000 == pytest.approx(6.0, abs=0.06)  # AAC priming adds a few ms at most
    spectrum = np.abs(np.fft.rfft(pcm[4000:-4000]))
    peak_hz = np.argmax(spectrum) * 16000 / len(pcm[4000:-4000])
    assert peak_hz == pytest.approx(440.0, abs=3.0)
    assert str(wav_path).startswith(str(media_cache))
    assert media.extract_audio(videos["silent"]) is None


def test_each_video_decodes_once_then_comes_from_disk(videos, monkeypatch):
    calls = []
    real = media.decode_at
    monkeypatch.setattr(media, "decode_at", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = media.sampled_frames(videos["tone"], count=4)
    media._MEMO.clear()  # a new process: only the disk cache is left
    second = media.sampled_frames(videos["tone"], count=4)
    assert len(calls) == 1
    assert [f.path for f in first.frames] == [f.path for f in second.frames]
    media.sampled_frames(videos["tone"], count=3)  # another sampling plan is another entry
    assert len(calls) == 2


def test_missing_video_is_a_clear_error(tmp_path):
    with pytest.raises(media.MediaError, match="not found"):
        media.sampled_frames(tmp_path / "nope.mp4")


def test_speech_track_from_espeak(tmp_path):
    wav = synth.espeak_wav("hello world", tmp_path / "s.wav")
    if wav is None:
        missing("the program espeak-ng", "tests/setup.d/70-longshot.sh installs it")
    video = synth.write_video(tmp_path / "speech.mp4", seconds=3.0, speech_wav=wav)
    out = media.extract_audio(video)
    with wave.open(str(out)) as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(float)
    assert len(pcm) / 16000 == pytest.approx(3.0, abs=0.06)
    assert np.sqrt(np.mean(pcm[: 16000] ** 2)) > 300  # speech in the first second, not silence
