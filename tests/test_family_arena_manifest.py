"""What a family contributes to the arena is named in its manifest and read from there: how its
tasks are shown (``arena_display``), the category of its battles (``arena_category``) and the live
kinds it adds with their renderer (``live``). And ``Task.family`` is the manifest's name, never a
modality: the leaderboard's family filter and the arena's display both key on it."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from types import SimpleNamespace

from fastapi.testclient import TestClient
from requirements import needs

from harness import families
from harness.family import Family, LiveKind
from harness.leaderboard.arena import categories, create_arena_app, failures, live, pool, suitability
from harness.leaderboard.arena.config import ArenaConfig
from harness.leaderboard.arena.render3d import renderer_for
from harness.registry import entries

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- Task.family is the manifest's name


def test_every_registered_task_carries_its_manifests_name() -> None:
    """The listing (``harness tasks``) and every stored task row get the family from ``@task``: it is
    the name of the manifest whose package holds the task, for every task of every family."""
    checked = 0
    for entry in entries("task"):
        fam = families.family_of_module(entry.factory.__module__)
        if fam is None:  # a single task of another distribution (entry-point group harness.tasks)
            continue
        assert entry.family == fam.name, (entry.name, entry.family, fam.name)
        checked += 1
    assert checked >= 47


def _family_keywords(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in ("task", "Task"):
            for kw in node.keywords:
                if kw.arg == "family" and isinstance(kw.value, ast.Constant):
                    out.append((node.lineno, str(kw.value.value)))
    return out


def test_the_tasks_literal_family_values_are_their_folders_name() -> None:
    """``@task(family=...)`` and the ``Task(family=...)`` a factory returns (the value that is
    stored) say the folder's family, not a modality ("3d", "video", "text" used to leak in)."""
    wrong, seen = [], 0
    for folder in sorted(p.parent for p in (ROOT / "tasks").glob("*/family.py")):
        for path in sorted(folder.rglob("*.py")):
            if "tests" in path.relative_to(folder).parts:
                continue
            for lineno, value in _family_keywords(path):
                seen += 1
                if value != folder.name:
                    wrong.append(f"{path.relative_to(ROOT)}:{lineno} family={value!r}")
    assert seen >= 60 and wrong == []


# ---------------------------------------------------------------- the arena reads the manifests


def test_the_arena_display_comes_from_the_manifest() -> None:
    fams = families.families()
    for fam in fams.values():
        assert fam.arena_display in (None, *suitability.DISPLAYS), fam.name
    # what the leaderboard's own table used to say, now each family's own declaration
    expected = {"gsm8k": "text", "qa": "text", "alignment": "text", "reliability": "text", "code3d": "render",
                "partverse": "render", "nvs": "image", "longshot": "video+audio", "methods": "none",
                "conformal": "none", "causal": "none", "decision": "none", "selection": "none", "transport": "none",
                "spa3d": "none", "dsgg": "none", "reid": "none", "puzzles": "none", "agents": "none"}
    assert {n: suitability.display_for("t", n, ["text"], {}) for n in expected} == expected
    # rows stored before families were named by their manifests keep their display
    assert suitability.display_for("code3d", "3d", ["text"], {}) == "render"
    assert suitability.display_for("gsm8k", "text", ["text"], {}) == "text"
    assert suitability.display_for("old", "video", ["text", "video"], {}) == "video+audio"
    # no declaration: the modalities; the operator's override first
    assert suitability.display_for("t", "", ["text", "image"], {}) == "image"
    assert suitability.display_for("t", "code3d", ["text"], {"t": "text"}) == "text"


def test_a_familys_battle_category_and_live_kind_come_from_its_manifest() -> None:
    code3d = families.family("code3d")
    assert code3d is not None and code3d.arena_category == "3d" and [k.name for k in code3d.live] == ["code3d"]
    kind = code3d.live[0]
    # a prompt that says nothing of 3D is still a 3D battle on the family's task
    assert categories.kind("Make me a chair", "code3d") == "3d" and categories.kind("Make me a chair", "qa") == "text"
    assert pool.known_kinds() == ("chat", "code3d")
    assert live.task_of("code3d") == kind.task == "code3d-live" and live.task_of("chat") == "chat"
    assert failures.live_tasks() == ("chat", "code3d-live")
    cfg = ArenaConfig()
    assert live.turn_deadline_s(cfg, "code3d") - live.turn_deadline_s(cfg, "chat") == kind.render_timeout_s > 0
    assert callable(families.resolve(kind.renderer or ""))


def test_a_live_kind_named_like_the_arenas_own_or_oddly_is_left_out() -> None:
    """A family cannot take over ``chat`` or put markup into the kind picker through a kind's name."""
    before = families.live_kinds()
    fake = Family(name="zz-probe", live=(LiveKind("chat", "Takeover"), LiveKind("<b>x</b>", "Odd"),
                                         LiveKind("code3d", "Second"), LiveKind("probe3d", "Probe")))
    families.families()["zz-probe"] = fake
    families.live_kinds.cache_clear()
    try:
        kinds = families.live_kinds()
        assert sorted(kinds) == ["code3d", "probe3d"] and kinds["code3d"][0].name == "code3d"
    finally:
        del families.families()["zz-probe"]
        families.live_kinds.cache_clear()
    assert families.live_kinds() == before


def test_the_live_page_offers_the_manifests_kinds_with_their_labels(sqlite_url: str, tmp_path: Path) -> None:
    app = create_arena_app(sqlite_url, ArenaConfig(secret="kinds", live_media_dir=str(tmp_path / "live")))
    with app.state.sessions() as s:
        for label in ("one", "two"):
            pool.add(s, "builtin:constant", {"text": "import bpy"}, label=f"chair-{label}", kinds=("chat", "code3d"))
    client = TestClient(app)
    page = client.get("/arena/chat").text
    assert '<option value="code3d">3D code (Blender)</option>' in page and '<option value="chat">Chat</option>' in page
    refused = client.post("/api/arena/chat", json={"prompt": "hi", "kind": "nosuch"})
    assert refused.status_code == 400 and "chat, code3d" in refused.json()["detail"]


def test_chat_has_no_renderer() -> None:
    app = SimpleNamespace(state=SimpleNamespace())
    assert renderer_for(app, ArenaConfig(), "chat") is None and renderer_for(app, ArenaConfig(), "nosuch") is None


def _have_bpy() -> bool:
    try:
        from harness.tasks.code3d.executor import BpyUnavailable, bpy_python

        bpy_python()
        return True
    except (ImportError, BpyUnavailable):
        return False


@needs(_have_bpy(), "the Blender (bpy) venv", "tests/setup.d/50-bpy.sh builds it")
def test_the_live_kinds_renderer_is_the_one_its_manifest_names(tmp_path: Path) -> None:
    """Built once per app from the manifest's import string (no Blender runs for a reply without code)."""
    app = SimpleNamespace(state=SimpleNamespace())
    render = renderer_for(app, ArenaConfig(live_render_workers=1), "code3d")
    assert render is not None and renderer_for(app, ArenaConfig(), "code3d") is render
    assert app.state.arena_renderers == {"code3d": render}
    out = asyncio.run(render("   ", tmp_path / "out"))
    assert out == {"status": "ERR_EXEC", "renders": [], "error": "no code in the reply"}
