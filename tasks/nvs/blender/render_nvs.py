"""Render one nvs_synthetic scene with Blender (runs with the bpy venv's Python, inside the sandbox).

Reads a JSON job on stdin: {"scene", "size", "n_train", "n_test", "samples", "seed", "points"} and
writes, under ./out: ``transforms_train.json`` / ``transforms_test.json`` (the NeRF-synthetic layout:
``camera_angle_x`` and per frame ``file_path`` without extension plus a camera-to-world
``transform_matrix`` in Blender's camera convention: looks down -Z, +Y up, and ``depth_file_path``),
``train/r_K.png`` and
``test/r_K.png`` (RGBA, transparent background), ``*/r_K_depth.npy`` (float32 z-depth along the
camera axis per pixel centre, 0 where the ray hits nothing) and ``points.npy`` (surface samples of
every mesh, area-weighted, for Chamfer and the floater fraction). Depth is ray-cast through the
exact pixel centres of the same camera, so it agrees with the pose by construction; the Cycles pixel
filter is set to a box of one pixel so the colour of a pixel comes from that pixel's footprint.
"""

from __future__ import annotations

import json
import math
import os
import sys

PROTOCOL = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)  # Blender's own prints go to stderr; stdout carries only our one-line reply

import bpy  # noqa: E402
import mathutils  # noqa: E402
import numpy as np  # noqa: E402

FOV_X = math.radians(40.0)


def material(name: str, kind: str, colour: tuple[float, float, float], scale: float = 8.0) -> bpy.types.Material:
    mat = bpy.data.materials.new(name)
    try:
        mat.use_nodes = True
    except AttributeError:  # always on in Blender 5
        pass
    nodes, links = mat.node_tree.nodes, mat.node_tree.links
    bsdf = nodes.get("Principled BSDF")
    bsdf.inputs["Roughness"].default_value = 0.8
    if kind == "plain":
        bsdf.inputs["Base Color"].default_value = (*colour, 1.0)
        return mat
    coord = nodes.new("ShaderNodeTexCoord")
    if kind == "checker":
        tex = nodes.new("ShaderNodeTexChecker")
        tex.inputs["Scale"].default_value = scale
        tex.inputs["Color1"].default_value = (*colour, 1.0)
        tex.inputs["Color2"].default_value = (0.95, 0.93, 0.85, 1.0)
        links.new(coord.outputs["Object"], tex.inputs["Vector"])
        links.new(tex.outputs["Color"], bsdf.inputs["Base Color"])
    else:  # "noise": a smooth non-repeating texture, coloured through a ramp
        tex = nodes.new("ShaderNodeTexNoise")
        tex.inputs["Scale"].default_value = scale
        ramp = nodes.new("ShaderNodeValToRGB")
        ramp.color_ramp.elements[0].color = (*colour, 1.0)
        ramp.color_ramp.elements[1].color = (0.95, 0.85, 0.2, 1.0)
        links.new(coord.outputs["Object"], tex.inputs["Vector"])
        links.new(tex.outputs["Fac"], ramp.inputs["Fac"])
        links.new(ramp.outputs["Color"], bsdf.inputs["Base Color"])
    return mat


def add(obj_op, mat: bpy.types.Material, **kw) -> bpy.types.Object:
    obj_op(**kw)
    obj = bpy.context.active_object
    obj.data.materials.append(mat)
    return obj


def build(scene_name: str) -> None:
    mesh = bpy.ops.mesh
    if scene_name == "textured":  # a textured object: noise-textured sphere on a checkered box
        add(mesh.primitive_uv_sphere_add, material("noise", "noise", (0.1, 0.3, 0.8), 3.0),
            radius=0.55, location=(0.0, 0.0, 0.35), segments=48, ring_count=24)
        add(mesh.primitive_cube_add, material("box", "checker", (0.8, 0.2, 0.1), 4.0),
            size=1.0, location=(0.0, 0.0, -0.5), scale=(1.2, 1.2, 0.4))
    elif scene_name == "repetitive":  # a fine checker floor and a 3x3 grid of identical cubes
        add(mesh.primitive_plane_add, material("floor", "checker", (0.15, 0.15, 0.15), 12.0),
            size=2.4, location=(0.0, 0.0, 0.0))
        cube = material("cube", "checker", (0.2, 0.5, 0.2), 6.0)
        for i in (-1, 0, 1):
            for j in (-1, 0, 1):
                add(mesh.primitive_cube_add, cube, size=0.3, location=(0.7 * i, 0.7 * j, 0.15))
    elif scene_name == "thin":  # thin structures: a fence of rods and a thin torus
        rod = material("rod", "plain", (0.8, 0.35, 0.05))
        for k in range(7):
            x = -0.9 + 0.3 * k
            add(mesh.primitive_cylinder_add, rod, radius=0.025, depth=1.4, location=(x, 0.0, 0.0), vertices=12)
        add(mesh.primitive_cylinder_add, rod, radius=0.025, depth=1.9, location=(0.0, 0.0, 0.55),
            rotation=(0.0, math.pi / 2, 0.0), vertices=12)
        add(mesh.primitive_torus_add, material("ring", "plain", (0.1, 0.4, 0.9)),
            major_radius=0.5, minor_radius=0.03, location=(0.0, 0.4, -0.2), rotation=(math.pi / 2, 0.0, 0.0))
    elif scene_name == "plane":  # a single plane z = 0 (tests check depth against the pose)
        add(mesh.primitive_plane_add, material("plane", "checker", (0.3, 0.3, 0.7), 6.0), size=2.0)
    else:
        raise ValueError(f"unknown scene {scene_name!r}")


def lights() -> None:
    sun = bpy.data.objects.new("Sun", bpy.data.lights.new("Sun", "SUN"))
    sun.data.energy = 3.0
    sun.rotation_euler = (math.radians(35), math.radians(10), math.radians(30))
    bpy.context.scene.collection.objects.link(sun)
    world = bpy.data.worlds.new("World")
    bpy.context.scene.world = world
    try:
        world.use_nodes = True
    except AttributeError:
        pass
    bg = world.node_tree.nodes.get("Background")
    bg.inputs["Color"].default_value = (0.35, 0.35, 0.35, 1.0)


def camera_positions(n: int, rng: np.random.Generator, radius: float, plane: bool) -> list[np.ndarray]:
    """Views on the upper hemisphere, elevation 20-65 degrees (straight down for the plane scene would
    be degenerate; it still gets oblique views)."""
    out = []
    for _ in range(n):
        az = rng.uniform(0, 2 * math.pi)
        el = math.radians(rng.uniform(25, 70) if plane else rng.uniform(20, 65))
        out.append(radius * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)]))
    return out


def look_at(position: np.ndarray) -> np.ndarray:
    """Camera-to-world matrix (Blender convention) for a camera at ``position`` looking at the origin."""
    rot = mathutils.Vector(tuple(-position)).to_track_quat("-Z", "Y").to_matrix()
    m = np.eye(4)
    m[:3, :3] = np.array(rot)
    m[:3, 3] = position
    return m


def ray_depth(c2w: np.ndarray, size: int) -> np.ndarray:
    scene = bpy.context.scene
    depsgraph = bpy.context.evaluated_depsgraph_get()
    focal = 0.5 * size / math.tan(0.5 * FOV_X)
    origin = mathutils.Vector(tuple(c2w[:3, 3]))
    rot, forward = c2w[:3, :3], -c2w[:3, 2]
    depth = np.zeros((size, size), dtype=np.float32)
    for i in range(size):
        for j in range(size):
            d_cam = np.array([(j + 0.5 - size / 2) / focal, -(i + 0.5 - size / 2) / focal, -1.0])
            d = rot @ d_cam
            d /= np.linalg.norm(d)
            hit, loc, *_ = scene.ray_cast(depsgraph, origin, mathutils.Vector(tuple(d)))
            if hit:
                depth[i, j] = float(np.dot(np.array(loc) - c2w[:3, 3], forward))
    return depth


def surface_points(n: int, rng: np.random.Generator) -> np.ndarray:
    depsgraph = bpy.context.evaluated_depsgraph_get()
    tris = []
    for obj in bpy.context.scene.objects:
        if obj.type != "MESH":
            continue
        ev = obj.evaluated_get(depsgraph)
        me = ev.to_mesh()
        me.calc_loop_triangles()
        verts = np.array([ev.matrix_world @ v.co for v in me.vertices])
        idx = np.array([t.vertices[:] for t in me.loop_triangles])
        tris.append(verts[idx])
        ev.to_mesh_clear()
    t = np.concatenate(tris)
    area = 0.5 * np.linalg.norm(np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]), axis=1)
    pick = rng.choice(len(t), size=n, p=area / area.sum())
    u, v = rng.random(n), rng.random(n)
    flip = u + v > 1
    u[flip], v[flip] = 1 - u[flip], 1 - v[flip]
    p = t[pick]
    return (p[:, 0] + u[:, None] * (p[:, 1] - p[:, 0]) + v[:, None] * (p[:, 2] - p[:, 0])).astype(np.float32)


def main() -> None:
    job = json.loads(sys.stdin.readline())
    size, seed = int(job["size"]), int(job["seed"])
    rng = np.random.default_rng(seed)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    build(job["scene"])
    lights()
    scene = bpy.context.scene
    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = int(job["samples"])
    scene.cycles.use_denoising = False
    scene.cycles.filter_width = 0.01  # box filter of (almost) one pixel
    scene.render.threads_mode = "FIXED"
    scene.render.threads = 1
    scene.render.resolution_x = scene.render.resolution_y = size
    scene.render.resolution_percentage = 100
    scene.render.film_transparent = True
    scene.render.image_settings.file_format = "PNG"
    scene.render.image_settings.color_mode = "RGBA"
    scene.view_settings.view_transform = "Standard"
    cam = bpy.data.objects.new("Cam", bpy.data.cameras.new("Cam"))
    cam.data.sensor_fit = "HORIZONTAL"
    cam.data.angle = FOV_X
    cam.data.clip_start, cam.data.clip_end = 0.05, 100.0
    scene.collection.objects.link(cam)
    scene.camera = cam
    out = os.path.abspath("out")
    radius = 3.2
    positions = {"train": camera_positions(int(job["n_train"]), rng, radius, job["scene"] == "plane"),
                 "test": camera_positions(int(job["n_test"]), rng, radius, job["scene"] == "plane")}
    for split, cams in positions.items():
        os.makedirs(os.path.join(out, split), exist_ok=True)
        frames = []
        for k, pos in enumerate(cams):
            c2w = look_at(pos)
            cam.matrix_world = mathutils.Matrix(c2w.tolist())
            bpy.context.view_layer.update()
            scene.render.filepath = os.path.join(out, split, f"r_{k}.png")
            bpy.ops.render.render(write_still=True)
            np.save(os.path.join(out, split, f"r_{k}_depth.npy"), ray_depth(c2w, size))
            frames.append({"file_path": f"./{split}/r_{k}", "rotation": 0.0, "transform_matrix": c2w.tolist(),
                           "depth_file_path": f"{split}/r_{k}_depth.npy"})
        with open(os.path.join(out, f"transforms_{split}.json"), "w") as fh:
            json.dump({"camera_angle_x": FOV_X, "frames": frames}, fh, indent=1)
    np.save(os.path.join(out, "points.npy"), surface_points(int(job["points"]), rng))
    PROTOCOL.write(json.dumps({"status": "OK"}) + "\n")


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # the host turns this into a one-line error
        PROTOCOL.write(json.dumps({"status": "ERROR", "error": f"{type(exc).__name__}: {exc}"}) + "\n")
        sys.exit(1)
