"""Synthetic runs to try the arena on (``harness arena demo``), and the fixture the tests and the
benchmark use: a text task whose models answer differently, with some samples where every model
answers the same (must never be served) and some where every model failed; optionally a 3D-style
task whose outputs are render images (PNG files named after the model, with the model name in a
PNG text chunk: the arena must leak neither).
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from harness.ratings.style import style_features
from harness.store.ops import get_or_create_model, get_or_create_task
from harness.store.schema import OPERATOR, ModelRow, RunRow, SampleResultRow, TaskRow
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow

DEMO_MODELS = ("demo-alpha", "demo-bravo", "demo-charlie", "demo-delta")
PALETTE = ((37, 99, 235), (22, 163, 74), (220, 38, 38), (202, 138, 4), (124, 58, 237), (8, 145, 178))
NEUTRAL = (150, 150, 158)  # the grey every demo render uses
# the demo's hidden ground truth for seeded votes (Elo-like display scale)
DEMO_STRENGTH = {"demo-alpha": 1120.0, "demo-bravo": 1040.0, "demo-charlie": 980.0, "demo-delta": 860.0}
_SENTENCES = ("Sunlight is scattered by air molecules.", "Shorter wavelengths scatter more strongly.",
              "At noon the light crosses less air.", "At sunset the path through the atmosphere is long.",
              "Blue is scattered out of the beam before it reaches you.", "What remains is red and orange.")


def _jitter(model: str, sample: int, modulo: int) -> int:
    """A stable pseudo-random number per (model, sample): varies across samples for every model, so
    no feature is constant for one model across battles."""
    return zlib.crc32(f"{model}/{sample}".encode()) % max(1, modulo)


def _variant_text(model: str, sample: int) -> str:
    """A plausible answer whose length and sentences vary with (model, sample), never naming either."""
    start = _jitter(model, sample, len(_SENTENCES))
    n = 1 + _jitter(model, sample + 1000, len(_SENTENCES))
    return " ".join(_SENTENCES[(start + k) % len(_SENTENCES)] for k in range(n))


def png_bytes(width: int, height: int, rgb: tuple[int, int, int], text: str = "", stripe: int = 0) -> bytes:
    """A small RGB PNG (a flat colour with a lighter band at row ``stripe``), with an optional
    tEXt chunk: written by hand so the demo needs no imaging library."""
    light = tuple(min(255, c + 90) for c in rgb)
    rows = []
    for y in range(height):
        colour = light if abs(y - stripe) < height // 8 else rgb
        rows.append(b"\x00" + bytes(colour) * width)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    if text:
        out += chunk(b"tEXt", b"Comment\x00" + text.encode())
    return out + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b"")


def glb_bytes(vertices: np.ndarray, faces: np.ndarray, name: str = "") -> bytes:
    """A one-node binary glTF (float32 positions, uint32 indices); ``name`` goes into the node and
    asset metadata, as a model's own code might put it there."""
    pos = np.asarray(vertices, dtype=np.float32).tobytes()
    idx = np.asarray(faces, dtype=np.uint32).tobytes()
    doc = {
        "asset": {"version": "2.0", "generator": f"demo {name}"},
        "scene": 0, "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0, "name": name, "translation": [0.0, 0.5, 0.0]}],
        "meshes": [{"name": name, "primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
        "buffers": [{"byteLength": len(pos) + len(idx)}],
        "bufferViews": [{"buffer": 0, "byteOffset": 0, "byteLength": len(pos)},
                        {"buffer": 0, "byteOffset": len(pos), "byteLength": len(idx)}],
        "accessors": [
            {"bufferView": 0, "componentType": 5126, "count": len(vertices), "type": "VEC3",
             "min": np.min(vertices, axis=0).tolist(), "max": np.max(vertices, axis=0).tolist()},
            {"bufferView": 1, "componentType": 5125, "count": int(np.size(faces)), "type": "SCALAR"},
        ],
    }
    js = json.dumps(doc).encode()
    js += b" " * (-len(js) % 4)
    binary = pos + idx
    binary += b"\x00" * (-len(binary) % 4)
    body = struct.pack("<II", len(js), 0x4E4F534A) + js + struct.pack("<II", len(binary), 0x004E4942) + binary
    return b"glTF" + struct.pack("<II", 2, 12 + len(body)) + body


def box(size: float) -> tuple[np.ndarray, np.ndarray]:
    """An axis-aligned cube of edge ``size`` centred at the origin: 8 vertices, 12 triangles."""
    h = size / 2
    v = np.array([[x, y, z] for x in (-h, h) for y in (-h, h) for z in (-h, h)])
    f = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return v, f


def _exists(session: Session, name: str) -> bool:
    # the operator's demo run: a pushed run of that name is another namespace's
    return session.scalar(select(RunRow.id).where(RunRow.name == name, RunRow.owner == OPERATOR)) is not None


def _run(session: Session, task_id: int, model: str, name: str) -> int:
    model_row = get_or_create_model(session, f"demo:{model}", backend="demo", display_name=model)
    run = RunRow(name=name, task_id=task_id, model_id=model_row.id, status="finished")
    session.add(run)
    session.flush()
    return run.id


def seed_text(
    sessions: sessionmaker[Session], *, task: str = "arena-demo", models: tuple[str, ...] = DEMO_MODELS,
    n_samples: int = 24, n_identical: int = 4, n_failed: int = 2,
) -> dict[str, int]:
    """One run per model; samples ``s000..``: the first ``n_identical`` have the same answer from every
    model, the next ``n_failed`` failed for every model, the rest differ. Returns model -> run id."""
    runs: dict[str, int] = {}
    with sessions() as s:
        t = get_or_create_task(s, name=task, version="1", content_hash=f"demo-{task}", family="text",
                               description="arena demo")
        for model in models:
            if _exists(s, f"{task}-{model}"):  # already seeded: idempotent
                continue
            run_id = _run(s, t.id, model, f"{task}-{model}")
            runs[model] = run_id
            rows = []
            for i in range(n_samples):
                question = f"Question {i}: explain why the sky looks blue at noon and red at sunset."
                kind = "same" if i < n_identical else "failed" if i < n_identical + n_failed else "differs"
                output = {
                    "same": "Rayleigh scattering.",
                    "failed": "",
                    "differs": _variant_text(model, i),
                }[kind]
                rows.append(SampleResultRow(
                    run_id=run_id, sample_id=f"s{i:03d}", epoch=0,
                    input={"messages": [{"role": "user", "content": [{"type": "text", "text": question}]}],
                           "metadata": {}},
                    output=output, error="RuntimeError: backend timeout" if kind == "failed" else None,
                    scores={}, details={},
                ))
            s.add_all(rows)
        s.commit()
    return runs


def seed_renders(
    sessions: sessionmaker[Session], root: Path, *, task: str = "arena-demo-3d", models: tuple[str, ...] = DEMO_MODELS,
    n_samples: int = 6, views: int = 4, size: int = 64,
) -> dict[str, int]:
    """3D-style runs: every sample has ``views`` render PNGs and a GLB per model under ``root`` (paths
    stored relative to it in ``details["renders"]`` and ``details["glb"]``, as a 3D family's task writes
    them); sample s000 renders identically for every model."""
    runs: dict[str, int] = {}
    root.mkdir(parents=True, exist_ok=True)
    with sessions() as s:
        t = get_or_create_task(s, name=task, version="1", content_hash=f"demo-{task}", family="3d",
                               description="arena 3D demo")
        for model in models:
            if _exists(s, f"{task}-{model}"):
                continue
            run_id = _run(s, t.id, model, f"{task}-{model}")
            runs[model] = run_id
            for i in range(n_samples):
                colour = NEUTRAL  # one material for every model: colour must not tell them apart
                paths = []
                for v in range(views):
                    rel = f"{model}/s{i:03d}/view{v}.png"
                    (root / rel).parent.mkdir(parents=True, exist_ok=True)
                    # the band moves with the shape (sample, model, view), never with the model alone
                    stripe = 0 if i == 0 else (v * size) // views + _jitter(model, i, size // 4)
                    (root / rel).write_bytes(png_bytes(size, size, colour, text=f"rendered by {model}", stripe=stripe))
                    paths.append(rel)
                glb = f"{model}/s{i:03d}/model.glb"
                (root / glb).write_bytes(glb_bytes(*box(0.5 + 0.05 * (_jitter(model, i, 10) if i else 0)), name=model))
                s.add(SampleResultRow(
                    run_id=run_id, sample_id=f"s{i:03d}", epoch=0,
                    input={"messages": [{"role": "user", "content": [
                        {"type": "text", "text": f"Write Blender code for object {i}: a chair with four legs."}]}],
                        "metadata": {}},
                    output=f"import bpy\n# object {i} variant {_jitter(model, i, 97) if i else 0}\n", prediction=None,
                    scores={}, details={"renders": paths, "glb": glb},
                ))
        s.commit()
    return runs


def seed_votes(
    sessions: sessionmaker[Session], *, n_votes: int = 400, voters: int = 40, seed: int = 0,
    tasks: tuple[str, ...] = ("arena-demo", "arena-demo-3d"), strength: dict[str, float] | None = None,
    tie_share: float = 0.15, days: float = 7.0,
) -> int:
    """Plausible votes on the demo tasks, so the ratings page has a table at once: battles between
    the demo models on samples where they differ, outcomes drawn from Bradley-Terry on
    :data:`DEMO_STRENGTH` (plus ties and some both-bad), sides at random, from ``voters`` pseudonymous
    voters spread over the last ``days`` (so they count against no real voter's limits). Returns the
    number of votes written; 0 when the demo tasks already have votes (idempotent) or do not exist."""
    import random
    import secrets
    from datetime import UTC, datetime, timedelta

    rng = random.Random(seed)
    truth = dict(strength or DEMO_STRENGTH)
    written = 0
    with sessions() as s:
        present = [t for t in tasks if s.scalar(select(TaskRow.id).where(TaskRow.name == t)) is not None]
        if not present or s.scalar(select(ArenaVoteRow.id).where(ArenaVoteRow.task.in_(present)).limit(1)):
            return 0
        now = datetime.now(UTC).replace(tzinfo=None)
        models = [m for m in truth]
        # each vote's stable model keys (leaderboard/arena/keys.py), as a vote through the page gets them
        ids = {spec.removeprefix("demo:"): i for i, spec in s.execute(
            select(ModelRow.id, ModelRow.spec).where(ModelRow.spec.in_([f"demo:{m}" for m in models]),
                                                     ModelRow.owner == OPERATOR))}
        key = {m: f"model:{ids[m]}" if m in ids else "" for m in models}
        for k in range(n_votes):
            task = present[k % len(present)]
            a, b = rng.sample(models, 2)
            sample = f"s{rng.randrange(6 if task.endswith('3d') else 24):03d}"
            p_a = 1.0 / (1.0 + 10 ** ((truth[b] - truth[a]) / 400.0))
            u = rng.random()
            outcome = ("both_bad" if rng.random() < 0.3 else "tie") if u < tie_share else (
                "left" if rng.random() < p_a else "right")
            when = now - timedelta(seconds=rng.uniform(60, days * 86400))
            voter = f"demo-voter-{rng.randrange(voters):03d}"
            text_a, text_b = _variant_text(a, k), _variant_text(b, k)
            battle = ArenaBattleRow(
                public_id=secrets.token_hex(12), task=task, sample_id=sample, epoch=0, left_model=a, right_model=b,
                media={}, features={"left": style_features(text_a), "right": style_features(text_b)},
                categories={"family": "3d" if task.endswith("3d") else "text", "language": "en", "length": "short",
                            "kind": "3d" if task.endswith("3d") else "text"},
                voter_hash=voter, ip_hash=f"demo-ip-{rng.randrange(voters):03d}", created_at=when,
                expires_at=when + timedelta(minutes=30), voted_at=when + timedelta(seconds=20),
            )
            s.add(battle)
            s.flush()
            s.add(ArenaVoteRow(
                battle_id=battle.id, task=task, sample_id=sample, left_model=a, right_model=b, left_key=key[a],
                right_key=key[b], outcome=outcome,
                voter_hash=voter, ip_hash=battle.ip_hash, served_at=when, created_at=when + timedelta(seconds=20),
                features=battle.features, categories=battle.categories, flagged=False,
            ))
            written += 1
        s.commit()
    return written
