"""models/media.py: frame sampling rule, sequential and seeking decoders, JPEG encoding, errors."""

from __future__ import annotations

import io

import pytest
from requirements import require
from test_openai_adapter import grey_level, write_video, write_wav

from harness.models import media

av = require("av", "PyAV writes and decodes the media fixtures (tests/setup.d/30-llamacpp.sh)")


def test_frame_times_rule():
    assert media.frame_times(4.0, fps=1.0, max_frames=32) == [0.5, 1.5, 2.5, 3.5]
    assert media.frame_times(4.0, fps=None, max_frames=2) == [1.0, 3.0]
    assert media.frame_times(3600.0, fps=1.0, max_frames=4) == [450.0, 1350.0, 2250.0, 3150.0]
    assert media.frame_times(0.2, fps=1.0, max_frames=8) == [pytest.approx(0.1)]  # at least one frame
    with pytest.raises(ValueError):
        media.frame_times(1.0, max_frames=0)


def test_sequential_and_seeking_decoders_pick_the_same_frames(tmp_path, monkeypatch):
    video = str(write_video(tmp_path / "clip.mp4", seconds=6, fps=5))  # grey 6*i at frame i, 5 fps
    sequential = media.video_frames(video, fps=None, max_frames=5)
    monkeypatch.setattr(media, "SEEK_AFTER_S", 1.0)  # make this 6 s clip count as long
    media._video_frames_cached.cache_clear()
    seeking = media.video_frames(video, fps=None, max_frames=5)
    assert [f.time for f in sequential] == [f.time for f in seeking] == [0.6, 1.8, 3.0, 4.2, 5.4]
    want = [18, 54, 90, 126, 162]  # the frames on screen then: 3, 9, 15, 21, 27
    for frames in (sequential, seeking):
        levels = [grey_level(f.jpeg) for f in frames]
        assert all(abs(a - b) <= 4 for a, b in zip(levels, want, strict=True)), levels


def test_frames_are_scaled_jpegs(tmp_path):
    video = str(write_video(tmp_path / "wide.mp4", seconds=1, size=(320, 240)))
    (frame,) = media.video_frames(video, max_frames=1, max_side=100)
    assert frame.jpeg[:2] == b"\xff\xd8" and frame.data_url.startswith("data:image/jpeg;base64,")
    with av.open(io.BytesIO(frame.jpeg)) as c:
        decoded = next(c.decode(video=0))
    assert (decoded.width, decoded.height) == (100, 74)  # 100 x 75 rounded down to even


def test_frames_are_cached_per_file_version(tmp_path):
    video = tmp_path / "clip.mp4"
    write_video(video, seconds=2)
    first = media.video_frames(str(video), max_frames=2)
    assert media.video_frames(str(video), max_frames=2)[0] is first[0]  # from the cache
    write_video(video, seconds=3)  # rewritten: new mtime/size, decoded again
    assert [f.time for f in media.video_frames(str(video), max_frames=2)] == [0.75, 2.25]


def test_media_errors_name_the_file(tmp_path):
    with pytest.raises(media.MediaError, match="missing.mp4"):
        media.video_frames(str(tmp_path / "missing.mp4"))
    not_video = write_wav(tmp_path / "tone.wav")
    with pytest.raises(media.MediaError, match="no video stream"):
        media.video_frames(str(not_video))
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all")
    with pytest.raises(media.MediaError, match="junk.mp4"):
        media.video_frames(str(junk))
    with pytest.raises(media.MediaError, match="does not look like an image"):
        media.image_url(str(tmp_path / "notes.txt"))
    assert media.image_url("https://x/y.png") == "https://x/y.png"
