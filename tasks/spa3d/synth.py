"""Synthetic physics scenes rendered to 3D point tracks, with matched physics violations.

A scene is a few rigid spheres in a box in front of a pinhole camera (x right, y up, z depth;
fx = fy = 256, cx = cy = 128 for a 256x256 frame). They fall under gravity, bounce off the floor
and walls (restitution), collide elastically with each other (equal-density spheres, mass ~ r^3)
and spin at a constant rate. Each sphere carries surface points; a point is visible when it faces
the camera, projects inside the frame and no other sphere blocks the ray to it.

Violations replay the *same* initial state with one rule broken from a frame ``t0`` on:
``teleport`` (an object jumps), ``gravity_flip`` (an object falls upwards), ``vanish`` (an object's
points disappear while in view), ``pass_through`` (objects pass through each other; only sampled
for scenes whose realistic run has a collision, so the twin really differs).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from harness.tasks.spa3d.tracks import Tracks, default_intrinsics, save_tracks

VIOLATIONS = ("teleport", "gravity_flip", "vanish", "pass_through")
GRAVITY = 9.81
FPS = 30.0
SUBSTEPS = 8
BOX_X = (-1.2, 1.2)
BOX_Z = (3.0, 5.5)
FLOOR_Y = -1.0
RESTITUTION_FLOOR = 0.8
RESTITUTION_WALL = 0.9


@dataclass
class SceneConfig:
    num_frames: int = 32
    points_per_object: int = 48
    min_objects: int = 2
    max_objects: int = 3
    feature_dim: int = 0  # >0: a constant per-object random feature (stand-in for semantics)


@dataclass
class Rules:
    collisions: bool = True
    gravity_flip_object: int = -1
    teleport_object: int = -1
    teleport_offset: np.ndarray = field(default_factory=lambda: np.zeros(3))
    t0: int = 10**9


@dataclass
class SceneState:
    pos: np.ndarray  # [K, 3] centres
    vel: np.ndarray  # [K, 3]
    radius: np.ndarray  # [K]
    spin_axis: np.ndarray  # [K, 3] unit
    spin_rate: np.ndarray  # [K] rad/s
    surface: np.ndarray  # [P, 3] unit-sphere points (shared)
    features: np.ndarray | None  # [K, F]


def _fibonacci_sphere(n: int) -> np.ndarray:
    i = np.arange(n) + 0.5
    phi = np.arccos(1 - 2 * i / n)
    theta = np.pi * (1 + 5**0.5) * i
    return np.stack([np.cos(theta) * np.sin(phi), np.sin(theta) * np.sin(phi), np.cos(phi)], axis=-1)


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    x, y, z = axis
    c, s, c1 = np.cos(angle), np.sin(angle), 1 - np.cos(angle)
    return np.array([
        [c + x * x * c1, x * y * c1 - z * s, x * z * c1 + y * s],
        [y * x * c1 + z * s, c + y * y * c1, y * z * c1 - x * s],
        [z * x * c1 - y * s, z * y * c1 + x * s, c + z * z * c1],
    ])


def random_scene(rng: np.random.Generator, cfg: SceneConfig) -> SceneState:
    k = int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
    radius = rng.uniform(0.15, 0.3, size=k)
    # objects start spread along x at random heights and are thrown towards the centre, so many
    # scenes contain a collision (needed for pass-through violations)
    xs = np.linspace(BOX_X[0] + 0.4, BOX_X[1] - 0.4, k) + rng.uniform(-0.1, 0.1, size=k)
    pos = np.stack([xs, rng.uniform(-0.4, 0.8, size=k), rng.uniform(3.8, 4.7, size=k)], axis=-1)
    vel = np.stack([-np.sign(xs) * rng.uniform(0.5, 2.0, size=k), rng.uniform(-1.0, 2.0, size=k),
                    rng.uniform(-0.3, 0.3, size=k)], axis=-1)
    axis = rng.normal(size=(k, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    feats = rng.normal(size=(k, cfg.feature_dim)).astype(np.float32) if cfg.feature_dim else None
    return SceneState(pos, vel, radius, axis, rng.uniform(-4, 4, size=k), _fibonacci_sphere(cfg.points_per_object),
                      feats)


def _collide_pairs(pos: np.ndarray, vel: np.ndarray, radius: np.ndarray) -> bool:
    hit = False
    k = len(radius)
    mass = radius**3
    for i in range(k):
        for j in range(i + 1, k):
            d = pos[j] - pos[i]
            dist = float(np.linalg.norm(d))
            if dist >= radius[i] + radius[j] or dist == 0:
                continue
            normal = d / dist
            rel = float(np.dot(vel[j] - vel[i], normal))
            overlap = radius[i] + radius[j] - dist
            pos[i] -= normal * overlap * mass[j] / (mass[i] + mass[j])
            pos[j] += normal * overlap * mass[i] / (mass[i] + mass[j])
            if rel < 0:  # approaching: elastic impulse along the normal
                impulse = 2 * rel / (1 / mass[i] + 1 / mass[j])
                vel[i] += impulse / mass[i] * normal
                vel[j] -= impulse / mass[j] * normal
                hit = True
    return hit


def _walls(pos: np.ndarray, vel: np.ndarray, radius: np.ndarray) -> None:
    low = pos[:, 1] - radius < FLOOR_Y
    pos[low, 1] = FLOOR_Y + radius[low]
    vel[low, 1] = np.where(vel[low, 1] < 0, -vel[low, 1] * RESTITUTION_FLOOR, vel[low, 1])
    for axis, (lo, hi) in ((0, BOX_X), (2, BOX_Z)):
        below, above = pos[:, axis] - radius < lo, pos[:, axis] + radius > hi
        pos[below, axis] = lo + radius[below]
        pos[above, axis] = hi - radius[above]
        vel[below, axis] = np.abs(vel[below, axis]) * RESTITUTION_WALL
        vel[above, axis] = -np.abs(vel[above, axis]) * RESTITUTION_WALL


def simulate(scene: SceneState, num_frames: int, rules: Rules) -> tuple[np.ndarray, np.ndarray, bool]:
    """Centres [T, K, 3], rotations [T, K, 3, 3] and whether any object-object collision happened."""
    pos, vel = scene.pos.copy(), scene.vel.copy()
    k = len(scene.radius)
    dt = 1.0 / FPS / SUBSTEPS
    centres = np.zeros((num_frames, k, 3))
    rots = np.zeros((num_frames, k, 3, 3))
    collided = False
    for t in range(num_frames):
        if t == rules.t0 and rules.teleport_object >= 0:
            pos[rules.teleport_object] += rules.teleport_offset
            _walls(pos, vel, scene.radius)
        centres[t] = pos
        for i in range(k):
            rots[t, i] = _rotation(scene.spin_axis[i], scene.spin_rate[i] * t / FPS)
        for _ in range(SUBSTEPS):
            g = np.full(k, -GRAVITY)
            if t >= rules.t0 and rules.gravity_flip_object >= 0:
                g[rules.gravity_flip_object] = GRAVITY
            vel[:, 1] += g * dt
            pos += vel * dt
            _walls(pos, vel, scene.radius)
            if rules.collisions:
                collided |= _collide_pairs(pos, vel, scene.radius)
            else:
                collided |= _overlapping(pos, scene.radius)
    return centres, rots, collided


def _overlapping(pos: np.ndarray, radius: np.ndarray) -> bool:
    d = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    return bool((d < radius[:, None] + radius[None]).any())


def render_tracks(scene: SceneState, centres: np.ndarray, rots: np.ndarray) -> Tracks:
    """Surface points of every sphere over time, with camera-facing / in-frame / occlusion visibility."""
    t_len, k = centres.shape[:2]
    p = len(scene.surface)
    normals = np.einsum("tkij,pj->tkpi", rots, scene.surface)  # [T, K, P, 3]
    points = centres[:, :, None] + normals * scene.radius[None, :, None, None]
    facing = np.sum(normals * points, axis=-1) < 0  # the camera sits at the origin
    intr = default_intrinsics()
    z = points[..., 2]
    u = intr[0] * points[..., 0] / z + intr[2]
    v = -intr[1] * points[..., 1] / z + intr[3]  # image rows grow downwards
    in_frame = (z > 0.1) & (u >= 0) & (u < 256) & (v >= 0) & (v < 256)
    blocked = np.zeros_like(facing)
    dist = np.linalg.norm(points, axis=-1)
    ray = points / dist[..., None]
    for j in range(k):  # does sphere j cut the camera ray before it reaches the point?
        c = centres[:, j][:, None, None]  # [T,1,1,3]
        along = np.sum(ray * c, axis=-1)
        perp2 = np.sum(c * c, axis=-1) - along**2
        entry = along - np.sqrt(np.maximum(scene.radius[j] ** 2 - perp2, 0))
        hits = (perp2 < scene.radius[j] ** 2) & (entry < dist - 1e-6)
        hits[:, j] = False
        blocked |= hits
    visible = facing & in_frame & ~blocked
    tracks = points.transpose(1, 2, 0, 3).reshape(k * p, t_len, 3)
    vis = visible.transpose(1, 2, 0).reshape(k * p, t_len)
    feats = None
    if scene.features is not None:
        feats = np.repeat(np.repeat(scene.features, p, axis=0)[:, None], t_len, axis=1)
    return Tracks(tracks.astype(np.float32), vis, feats, intr)


@dataclass
class Pair:
    realistic: Tracks
    violated: Tracks
    violation: str
    t0: int
    object_index: int


def make_pair(rng: np.random.Generator, cfg: SceneConfig, violation: str, max_tries: int = 50) -> Pair:
    """A realistic scene and its violated twin (same initial state)."""
    if violation not in VIOLATIONS:
        raise ValueError(f"unknown violation {violation!r}; known: {', '.join(VIOLATIONS)}")
    t_len = cfg.num_frames
    for _ in range(max_tries):
        scene = random_scene(rng, cfg)
        centres, rots, collided = simulate(scene, t_len, Rules())
        obj = int(rng.integers(len(scene.radius)))
        t0 = int(rng.integers(t_len // 3, 2 * t_len // 3))
        real = render_tracks(scene, centres, rots)
        if violation == "pass_through":
            if not collided:
                continue
            c2, r2, _ = simulate(scene, t_len, Rules(collisions=False))
            t0 = int(np.argmax(np.abs(c2 - centres).max(axis=(1, 2)) > 1e-6))
            return Pair(real, render_tracks(scene, c2, r2), violation, t0, -1)
        if violation == "vanish":
            p = cfg.points_per_object
            if not real.visible[obj * p:(obj + 1) * p, t0:].any():
                continue  # the object must be in view when it vanishes
            vis = real.visible.copy()
            vis[obj * p:(obj + 1) * p, t0:] = False
            return Pair(real, replace(real, visible=vis), violation, t0, obj)
        if violation == "gravity_flip":
            rules = Rules(gravity_flip_object=obj, t0=t0)
        else:
            offset = rng.normal(size=3)
            offset[2] *= 0.3
            rules = Rules(teleport_object=obj, teleport_offset=offset / np.linalg.norm(offset) * rng.uniform(0.5, 0.9),
                          t0=t0)
        c2, r2, _ = simulate(scene, t_len, rules)
        return Pair(real, render_tracks(scene, c2, r2), violation, t0, obj)
    raise RuntimeError(f"no scene with a usable {violation!r} violation in {max_tries} tries")


def realistic_set(n: int, seed: int, cfg: SceneConfig | None = None) -> list[Tracks]:
    """``n`` realistic scenes (the autoencoder's training data)."""
    cfg = cfg or SceneConfig()
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        scene = random_scene(rng, cfg)
        centres, rots, _ = simulate(scene, cfg.num_frames, Rules())
        out.append(render_tracks(scene, centres, rots))
    return out


def pair_set(n_per_violation: int, seed: int, cfg: SceneConfig | None = None,
             violations: tuple[str, ...] = VIOLATIONS) -> list[Pair]:
    cfg = cfg or SceneConfig()
    rng = np.random.default_rng(seed)
    return [make_pair(rng, cfg, v) for v in violations for _ in range(n_per_violation)]


def write_pairs(directory: str | Path, pairs: list[Pair]) -> Path:
    """Write each pair as two .npz files plus a ``pairs.jsonl`` manifest; returns the manifest."""
    import json

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, pair in enumerate(pairs):
        real = save_tracks(directory / f"{i:04d}_{pair.violation}_real.npz", pair.realistic)
        bad = save_tracks(directory / f"{i:04d}_{pair.violation}_violated.npz", pair.violated)
        rows.append({"id": f"{i:04d}", "realistic": real.name, "violated": bad.name, "violation": pair.violation,
                     "t0": pair.t0})
    manifest = directory / "pairs.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return manifest
