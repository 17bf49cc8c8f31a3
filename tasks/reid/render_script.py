"""Blender script (runs under the bpy venv's Python, not the harness): procedural figures -> renders.

Invoked as ``python render_script.py JOB.json``. The job lists figures, each with its body-model
parameters (``params``, as ``figures.py`` draws them or as the lifting model predicts them) and what
to render:

- ``views``: the figure's mesh from each camera (RGBA PNG; alpha is the silhouette). For the data set
  these are the identities' own views; for a lifted training image, its re-projection from the
  predicted source camera (what the consistency filter compares with the source image);
- ``novel`` (optional, with ``source_cam``): the mesh from new cameras, each with its per-pixel
  visibility map (white = surface the ``source_cam`` sees, black = surface it does not, or background).

Every figure is a set of ellipsoids built as numpy arrays, so geometry, colours and part ids are known
per vertex; visibility is a ray cast from the source camera to each vertex (mathutils BVH).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import bpy
import numpy as np
from mathutils import Vector
from mathutils.bvhtree import BVHTree

RINGS, SEGMENTS = 18, 24


def ellipsoid(center, radii):
    """Vertices [n,3] and quad faces of a UV ellipsoid (poles as single vertices)."""
    cx, cy, cz = center
    rx, ry, rz = radii
    verts = [(cx, cy, cz - rz)]
    for i in range(1, RINGS):
        theta = math.pi * i / RINGS - math.pi / 2
        for j in range(SEGMENTS):
            phi = 2 * math.pi * j / SEGMENTS
            verts.append((cx + rx * math.cos(theta) * math.cos(phi), cy + ry * math.cos(theta) * math.sin(phi),
                          cz + rz * math.sin(theta)))
    verts.append((cx, cy, cz + rz))
    faces = []
    top = len(verts) - 1
    for j in range(SEGMENTS):
        faces.append((0, 1 + (j + 1) % SEGMENTS, 1 + j))
    for i in range(RINGS - 2):
        a, b = 1 + i * SEGMENTS, 1 + (i + 1) * SEGMENTS
        for j in range(SEGMENTS):
            k = (j + 1) % SEGMENTS
            faces.append((a + j, a + k, b + k, b + j))
    last = 1 + (RINGS - 2) * SEGMENTS
    for j in range(SEGMENTS):
        faces.append((last + j, last + (j + 1) % SEGMENTS, top))
    return np.asarray(verts, dtype=np.float64), faces


def build_figure(p):
    """(verts [n,3], faces, colours [n,3], part ids [n]) of one identity (front faces -y)."""
    h, w = p["height"], p["build"]
    leg = p["leg_ratio"] * h
    torso = 0.31 * h
    hr = 0.105 * p["head_scale"]
    shoulder = leg + torso * 0.92
    parts = [
        ("leg", (-0.085 * w, 0, leg / 2), (0.07 * w, 0.075 * w, leg / 2 + 0.02)),
        ("leg", (0.085 * w, 0, leg / 2), (0.07 * w, 0.075 * w, leg / 2 + 0.02)),
        ("shoe", (-0.085 * w, -0.035, 0.04), (0.06, 0.11, 0.045)),
        ("shoe", (0.085 * w, -0.035, 0.04), (0.06, 0.11, 0.045)),
        ("torso", (0, 0, leg + torso / 2), (0.19 * w, 0.115 * w, torso / 2 + 0.03)),
        ("arm", (-(0.19 * w + 0.045), 0, shoulder - 0.17 * h), (0.048, 0.05, 0.18 * h)),
        ("arm", (0.19 * w + 0.045, 0, shoulder - 0.17 * h), (0.048, 0.05, 0.18 * h)),
        ("head", (0, 0, leg + torso + hr * 1.15), (hr * 0.9, hr, hr * 1.15)),
    ]
    if p.get("hat"):
        parts.append(("hat", (0, 0, leg + torso + hr * 2.1), (hr * 1.25, hr * 1.3, hr * 0.45)))
    if p.get("backpack"):
        parts.append(("backpack", (0, 0.115 * w + 0.075, leg + torso * 0.58), (0.15 * w, 0.08, 0.17)))
    if p.get("bag"):
        parts.append(("bag", (0.19 * w + 0.1, -0.02, leg + 0.02), (0.04, 0.12, 0.1)))
    all_v, all_f, all_c, all_p = [], [], [], []
    offset = 0
    for pid, (name, c, r) in enumerate(parts):
        v, f = ellipsoid(c, r)
        col = np.tile(np.asarray(p["colours"].get(name, p["colours"]["top"]), dtype=np.float64), (len(v), 1))
        rel = (v - np.asarray(c)) / np.asarray(r)
        if name == "torso":
            pat, pc = p["pattern"], np.asarray(p["colours"]["pattern"])
            if pat == "hstripes":
                col[np.floor((v[:, 2] - c[2]) / 0.055).astype(int) % 2 == 1] = pc
            elif pat == "vstripes":
                ang = np.arctan2(rel[:, 1], rel[:, 0])
                col[np.floor(ang / (math.pi / 6)).astype(int) % 2 == 1] = pc
            elif pat == "logo":
                col[(rel[:, 1] < -0.55) & (np.abs(rel[:, 0]) < 0.45) & (np.abs(rel[:, 2]) < 0.4)] = pc
            col[rel[:, 2] < -0.55] = np.asarray(p["colours"]["bottom"])  # the belt line
        elif name == "arm":
            if p["sleeves"] == "short":
                col[rel[:, 2] < 0.2] = np.asarray(p["colours"]["skin"])
            else:
                col[rel[:, 2] < -0.85] = np.asarray(p["colours"]["skin"])
        elif name == "leg":
            col[:] = np.asarray(p["colours"]["bottom"])
            if p["lower"] == "shorts":
                col[rel[:, 2] < 0.1] = np.asarray(p["colours"]["skin"])
        elif name == "head":
            col[:] = np.asarray(p["colours"]["skin"])
            low = -0.9 if p["hair"] == "long" else -0.2  # long hair covers the back of the head and neck
            hair = (rel[:, 2] > 0.25) | ((rel[:, 1] > 0.2) & (rel[:, 2] > low))
            col[hair] = np.asarray(p["colours"]["hair"])
        all_v.append(v)
        all_f.extend(tuple(i + offset for i in face) for face in f)
        all_c.append(col)
        all_p.append(np.full(len(v), pid))
        offset += len(v)
    return np.vstack(all_v), all_f, np.vstack(all_c), np.concatenate(all_p)


def camera_frame(cam, target):
    """Orthographic camera placement: (location, forward unit vector) from azimuth/elevation (degrees)."""
    az, el, dist = math.radians(cam[0]), math.radians(cam[1]), cam[2]
    offset = Vector((math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el))) * dist
    loc = Vector(target) + offset
    return loc, (Vector(target) - loc).normalized()


def visible_vertices(verts, faces, cam, target):
    """Vertices whose first hit along the source camera's (parallel) rays is themselves."""
    tree = BVHTree.FromPolygons([tuple(v) for v in verts], faces, epsilon=0.0)
    loc, fwd = camera_frame(cam, target)
    out = np.zeros(len(verts), dtype=bool)
    for i, v in enumerate(verts):
        vv = Vector(v)
        along = (vv - loc).dot(fwd)
        origin = vv - fwd * along
        hit, _normal, _index, dist = tree.ray_cast(origin, fwd, along + 1.0)
        out[i] = hit is not None and dist >= along - 2e-3
    return out


class Renderer:
    def __init__(self, size, samples):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        scene = bpy.context.scene
        scene.render.engine = "CYCLES"
        scene.cycles.device = "CPU"
        scene.cycles.samples = samples
        scene.cycles.use_denoising = False
        scene.cycles.max_bounces = 2
        scene.render.threads_mode = "FIXED"
        scene.render.threads = 1
        scene.render.resolution_x, scene.render.resolution_y = size
        scene.render.resolution_percentage = 100
        scene.render.film_transparent = True
        scene.render.image_settings.file_format = "PNG"
        scene.render.image_settings.color_mode = "RGBA"
        scene.view_settings.view_transform = "Standard"
        world = bpy.data.worlds.new("w")
        world.use_nodes = True
        world.node_tree.nodes["Background"].inputs[0].default_value = (0.45, 0.45, 0.45, 1)
        scene.world = world
        sun = bpy.data.objects.new("sun", bpy.data.lights.new("sun", "SUN"))
        sun.data.energy = 3.0
        sun.rotation_euler = (math.radians(35), math.radians(10), math.radians(30))
        scene.collection.objects.link(sun)
        cam = bpy.data.objects.new("cam", bpy.data.cameras.new("cam"))
        cam.data.type = "ORTHO"
        cam.data.ortho_scale = 2.2
        cam.data.sensor_fit = "VERTICAL"
        scene.collection.objects.link(cam)
        scene.camera = cam
        self.scene, self.cam = scene, cam
        self.shaded = self._material("shaded", "Col", emit=False)
        self.flat = self._material("flat", "Vis", emit=True)
        self.obj = None

    def _material(self, name, attribute, emit):
        mat = bpy.data.materials.new(name)
        mat.use_nodes = True
        nodes, links = mat.node_tree.nodes, mat.node_tree.links
        nodes.clear()
        attr = nodes.new("ShaderNodeAttribute")
        attr.attribute_name = attribute
        shader = nodes.new("ShaderNodeEmission" if emit else "ShaderNodeBsdfDiffuse")
        out = nodes.new("ShaderNodeOutputMaterial")
        links.new(attr.outputs["Color"], shader.inputs["Color"])
        links.new(shader.outputs[0], out.inputs["Surface"])
        return mat

    def set_mesh(self, verts, faces, colours, vis=None):
        mesh = bpy.data.meshes.new("fig")
        mesh.from_pydata([tuple(v) for v in verts], [], faces)
        mesh.update()
        for name, values in (("Col", colours), ("Vis", None if vis is None else np.repeat(vis[:, None], 3, 1))):
            if values is None:
                continue
            attr = mesh.color_attributes.new(name, "FLOAT_COLOR", "POINT")
            rgba = np.concatenate([np.asarray(values, dtype=np.float32), np.ones((len(verts), 1), np.float32)], 1)
            attr.data.foreach_set("color", rgba.ravel())
        for poly in mesh.polygons:
            poly.use_smooth = True
        if self.obj is not None:
            old = self.obj.data
            self.obj.data = mesh
            bpy.data.meshes.remove(old)
        else:
            self.obj = bpy.data.objects.new("fig", mesh)
            self.scene.collection.objects.link(self.obj)
        self.obj.data.materials.clear()
        self.obj.data.materials.append(self.shaded)
        self.obj.data.materials.append(self.flat)

    def render(self, cam, target, out, flat=False):
        loc, fwd = camera_frame(cam, target)
        self.cam.location = loc
        self.cam.rotation_euler = fwd.to_track_quat("-Z", "Y").to_euler()
        idx = 1 if flat else 0
        for poly in self.obj.data.polygons:
            poly.material_index = idx
        self.scene.render.filepath = str(out)
        bpy.ops.render.render(write_still=True)


def main():
    job = json.loads(Path(sys.argv[1]).read_text())
    r = Renderer(tuple(job["size"]), int(job["samples"]))
    t0 = time.time()
    n = 0
    for fig in job["figures"]:
        p = fig["params"]
        verts, faces, colours, _parts = build_figure(p)
        target = (0.0, 0.0, p["height"] * 0.5)
        r.set_mesh(verts, faces, colours)
        for view in fig["views"]:
            r.render(view["cam"], target, view["out"])
            n += 1
        if fig.get("novel"):
            vis = visible_vertices(verts, faces, fig["source_cam"], target)
            r.set_mesh(verts, faces, colours, vis.astype(np.float32))
            for novel in fig["novel"]:
                r.render(novel["cam"], target, novel["out"])
                r.render(novel["cam"], target, novel["vis_out"], flat=True)
                n += 2
    print(json.dumps({"renders": n, "seconds": round(time.time() - t0, 2)}))


if __name__ == "__main__":
    main()
