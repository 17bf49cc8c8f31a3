"""Relocatable paths: what ``harness demo`` stores is relative to its media folder, the leaderboard
finds such a path under its media roots, and a served file's URL names it relative to its root, not
by the server's absolute path. Traversal out of a root stays refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.leaderboard.media import allowed_path, media_item, url_path
from harness.stored_paths import ENV, stored_path


@pytest.fixture
def media(tmp_path: Path) -> Path:
    root = tmp_path / "media"
    (root / "artifacts" / "run1").mkdir(parents=True)
    (root / "artifacts" / "run1" / "view.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return root


def test_paths_are_absolute_unless_the_demo_asks(media: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.chdir(media)
    assert stored_path("artifacts/run1/view.png") == str(media.resolve() / "artifacts/run1/view.png")


def test_under_the_named_current_folder_a_path_is_stored_relative(media: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(media)
    monkeypatch.setenv(ENV, str(media))
    assert stored_path(media / "artifacts" / "run1" / "view.png") == "artifacts/run1/view.png"
    assert stored_path("artifacts/run1/../run1/view.png") == "artifacts/run1/view.png"
    # outside the folder: absolute (a relative "../secret.png" would name another file elsewhere)
    assert stored_path(media.parent / "secret.png") == str((media.parent / "secret.png").resolve())


def test_a_named_folder_not_the_current_one_changes_nothing(media: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative path resolves against the current folder: relative to another one, the process
    that stored it could not read it back."""
    monkeypatch.chdir(media.parent)
    monkeypatch.setenv(ENV, str(media))
    assert os.path.isabs(stored_path(media / "artifacts" / "run1" / "view.png"))


def test_the_leaderboard_finds_a_relative_path_under_its_root(media: Path, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the server runs anywhere
    real = (media / "artifacts" / "run1" / "view.png").resolve()
    assert allowed_path("artifacts/run1/view.png", [media]) == real
    assert allowed_path(str(real), [media]) == real  # absolute stored paths keep working
    for attack in ("../secret.png", "artifacts/../../secret.png", str(tmp_path / "secret.png"), "/etc/passwd",
                   "artifacts/run1/view.png\x00.txt"):
        assert allowed_path(attack, [media]) is None, attack


def test_a_served_file_is_named_relative_to_its_root(media: Path, tmp_path: Path) -> None:
    real = (media / "artifacts" / "run1" / "view.png").resolve()
    assert url_path(real, [media]) == "artifacts/run1/view.png"
    for stored in ("artifacts/run1/view.png", str(real)):
        item = media_item("output", "image", stored, [media])
        assert item.url == "/media?path=artifacts/run1/view.png"
        assert str(tmp_path) not in (item.url or "")
    # nested roots: the name is the one that resolves back to the same file
    other = media / "artifacts"
    assert allowed_path(url_path(real, [other, media]), [other, media]) == real
