"""Blender worker: runs inside the sandbox with the bpy venv's Python (not with harness's Python).

Protocol: one JSON job per stdin line, one JSON reply per line on the original stdout (fd 1 is
redirected to stderr first, so nothing Blender or the model prints can corrupt the channel).

The process is a *zygote*: it imports bpy, trimesh, numpy once and then never runs model code
itself. Each job runs in a forked child (warm imports, fresh interpreter state, its own scene), with
the phases reference protocol: factory-reset the scene, exec the model's code, require >= 1 mesh,
export GLB, render the four reference views with Cycles on CPU. The zygote watches the child's phase
file and kills it past the time limits; after each job it kills everything else in the sandbox's PID
namespace (anything the model's code left running) when it is that namespace's init. The zygote is
not dumpable, so a script (same uid) cannot read its memory or ptrace it. A second
fork (clean, no model code ever ran in it) then loads the exported GLB with trimesh to sample the
surface, split it into parts and flag floating parts; the host computes Chamfer from those samples,
so reference geometry never has to be readable inside the sandbox.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
import traceback
from typing import Any

PROTOCOL = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)  # everything printed from here on goes to stderr
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bpy  # noqa: E402
import geometry  # noqa: E402
import mathutils  # noqa: E402
import numpy as np  # noqa: E402
import trimesh  # noqa: E402
from PIL import Image  # noqa: E402

VIEW_AZIMUTHS = (45.0, 135.0, 225.0, 315.0)  # Image_005, _015, _025, _035 in the reference
VIEW_NAMES = ("Image_005.png", "Image_015.png", "Image_025.png", "Image_035.png")
RADIUS_FACTOR, HEIGHT_FACTOR = 1.8, 0.6


def write_json(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def set_phase(job_dir: str, phase: str) -> None:
    write_json(os.path.join(job_dir, "phase.json"), {"phase": phase, "t": time.time()})


def mesh_objects() -> list:
    return [o for o in bpy.context.scene.objects if o.type == "MESH"]


def world_bbox(objects: list) -> tuple[mathutils.Vector, float]:
    depsgraph = bpy.context.evaluated_depsgraph_get()
    lo = mathutils.Vector((float("inf"),) * 3)
    hi = mathutils.Vector((float("-inf"),) * 3)
    for obj in objects:
        ev = obj.evaluated_get(depsgraph)
        for corner in ev.bound_box:
            p = ev.matrix_world @ mathutils.Vector(corner)
            lo = mathutils.Vector(map(min, lo, p))
            hi = mathutils.Vector(map(max, hi, p))
    extent = max(hi - lo)
    if not np.isfinite(extent):
        raise ValueError(f"non-finite scene extent {extent}")
    return (lo + hi) / 2, float(extent) or 1.0  # the reference falls back to 1.0 for a flat/point scene


def add_area_light(name: str, location: tuple[float, float, float], energy: float, size: float) -> None:
    light = bpy.data.objects.new(name, bpy.data.lights.new(name, "AREA"))
    light.data.energy, light.data.size = energy, size
    light.location = location
    light.rotation_euler = (-mathutils.Vector(location)).to_track_quat("-Z", "Y").to_euler()
    bpy.context.scene.collection.objects.link(light)


def setup_reference_scene(opts: dict) -> tuple[float, float, float]:
    """The reference render scene (3DCodeBench core/render.py, parameters as published): meshes
    centred on their joint bounding box, a dark uniform world, three area lights (key/fill/rim), a
    neutral grey material on meshes without one, a 50 mm camera. Returns (extent, radius, height)."""
    scene = bpy.context.scene
    meshes = mesh_objects()
    center, extent = world_bbox(meshes)
    for obj in meshes:
        if obj.parent is None:
            obj.location = obj.location - center
    r, h = RADIUS_FACTOR * extent, HEIGHT_FACTOR * extent
    world = scene.world or bpy.data.worlds.new("World")
    scene.world = world
    try:
        world.use_nodes = True  # deprecated (always on) in 5.x; harmless where still settable
    except AttributeError:
        pass
    tree = world.node_tree
    if tree is not None:
        for node in list(tree.nodes):
            tree.nodes.remove(node)
        bg, out = tree.nodes.new("ShaderNodeBackground"), tree.nodes.new("ShaderNodeOutputWorld")
        bg.inputs[0].default_value = (0.012, 0.013, 0.021, 1.0)
        bg.inputs[1].default_value = 1.0
        tree.links.new(bg.outputs[0], out.inputs[0])
    add_area_light("Key", (r * 0.9, -r * 0.7, h * 1.7), 1200.0, extent * 0.9)
    add_area_light("Fill", (-r * 0.6, -r * 0.4, h), 400.0, extent * 1.2)
    add_area_light("Rim", (0.0, r * 0.9, h * 1.3), 600.0, extent * 0.7)
    material = bpy.data.materials.new("eval_default")
    try:
        material.use_nodes = True
    except AttributeError:
        pass
    bsdf = material.node_tree.nodes.get("Principled BSDF") if material.node_tree else None
    if bsdf is not None:
        bsdf.inputs["Base Color"].default_value = (0.72, 0.72, 0.75, 1.0)
        bsdf.inputs["Roughness"].default_value = 0.65
    for obj in meshes:
        if not obj.data.materials:
            obj.data.materials.append(material)
    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = int(opts.get("samples", 16))
    scene.cycles.use_denoising = bool(opts.get("denoise", False))
    scene.render.threads_mode = "FIXED"
    scene.render.threads = int(opts.get("threads", 1))
    scene.render.resolution_x = scene.render.resolution_y = int(opts.get("size", 256))
    scene.render.resolution_percentage = 100
    scene.render.film_transparent = True  # alpha gives the silhouette for image metrics
    scene.render.image_settings.file_format = "PNG"
    scene.render.image_settings.color_mode = "RGBA"
    return extent, r, h


def render_views(job_dir: str, opts: dict) -> list[str]:
    scene = bpy.context.scene
    extent, r, h = setup_reference_scene(opts)
    cam = bpy.data.objects.new("EvalCam", bpy.data.cameras.new("EvalCam"))
    cam.data.lens = 50
    cam.data.clip_end = extent * 25
    scene.collection.objects.link(cam)
    scene.camera = cam
    paths = []
    for az, name in zip(VIEW_AZIMUTHS, VIEW_NAMES, strict=True):
        a = np.radians(az)
        cam.location = mathutils.Vector((r * np.cos(a), r * np.sin(a), h))
        cam.rotation_euler = (-cam.location).to_track_quat("-Z", "Y").to_euler()
        scene.render.filepath = os.path.join(job_dir, name)
        bpy.ops.render.render(write_still=True)
        paths.append(scene.render.filepath)
    return paths


def run_job_child(job: dict, job_dir: str) -> None:
    """In the forked child: everything that touches the model's code. Writes result.json."""
    result: dict = {"status": "ERR_EXEC", "error": "", "traceback": "", "n_meshes": 0, "views": 0}
    times: dict = {}
    try:
        set_phase(job_dir, "exec")
        # no scene reset needed here: the zygote reset once at start-up and never runs model code, so
        # every forked child starts from that empty factory scene
        t0 = time.monotonic()
        script = os.path.join(job_dir, "model_script.py")
        with open(script, "w") as fh:
            fh.write(job["code"])
        try:
            code = compile(job["code"], script, "exec")
            exec(code, {"__name__": "__main__", "__file__": script, "__builtins__": __builtins__})
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise
        times["exec"] = time.monotonic() - t0
        for obj in list(bpy.context.scene.objects):  # the reference drops the script's cameras/lights
            if obj.type in ("CAMERA", "LIGHT"):
                bpy.data.objects.remove(obj, do_unlink=True)
        meshes = mesh_objects()
        result["n_meshes"] = len(meshes)
        if not meshes:
            result.update(status="ERR_NO_MESH", error="script finished without leaving any MESH object")
            return
        set_phase(job_dir, "export")
        t0 = time.monotonic()
        try:
            # as the reference's core/export_glb.py: selected meshes, modifiers applied, Y-up, no materials
            bpy.ops.object.select_all(action="DESELECT")
            for obj in meshes:
                obj.select_set(True)
            bpy.ops.export_scene.gltf(
                filepath=os.path.join(job_dir, "model.glb"), export_format="GLB", use_selection=True,
                export_apply=True, export_yup=True, export_materials="NONE",
            )  # fmt: skip
            times["export"] = time.monotonic() - t0
            set_phase(job_dir, "render")
            t0 = time.monotonic()
            views = render_views(job_dir, job.get("render", {}))
            result["views"] = sum(os.path.exists(p) for p in views)
            times["render"] = time.monotonic() - t0
        except BaseException as exc:  # noqa: BLE001 - everything past exec is the render stage
            result.update(status="ERR_RENDER", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
            return
        if result["views"] != len(VIEW_NAMES):
            result.update(status="ERR_RENDER", error=f"only {result['views']} of 4 views rendered")
            return
        result.update(status="OK")
    except BaseException as exc:  # noqa: BLE001 - the model's code may raise anything
        result.update(status="ERR_EXEC", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    finally:
        result["times"] = times
        write_json(os.path.join(job_dir, "result.json"), result)


def analyse_child(job: dict, job_dir: str) -> None:
    """In a clean fork: surface samples, parts and floating parts of the exported GLB, thumbnails."""
    out: dict = {}
    t0 = time.monotonic()
    for name in ("points.npy", "thumbs.npy", "views.npy", "analysis.json"):  # whatever the script planted
        try:
            os.unlink(os.path.join(job_dir, name))
        except FileNotFoundError:
            pass
    glb = os.path.join(job_dir, "model.glb")
    mesh = trimesh.load(glb, force="mesh")
    # glTF duplicates vertices along normal/UV seams; merge by position so parts are real islands
    mesh.merge_vertices(merge_tex=True, merge_norm=True)
    n_points = int(job.get("points", 8192))
    rng_seed = int(job.get("seed", 0))
    points, _ = trimesh.sample.sample_surface(mesh, n_points, seed=rng_seed)
    np.save(os.path.join(job_dir, "points.npy"), np.asarray(points, dtype=np.float32))
    parts = mesh.split(only_watertight=False)
    extent = float(max(mesh.extents)) if len(mesh.vertices) else 0.0
    tolerance = float(job.get("contact_tolerance", 0.01)) * extent
    samples, areas = [], []
    max_parts = int(job.get("max_parts", 200))
    for part in list(parts)[:max_parts]:
        count = max(64, min(2048, int(4096 * part.area / max(mesh.area, 1e-12))))
        pts = trimesh.sample.sample_surface(part, count, seed=rng_seed)[0] if part.area > 0 else part.vertices
        samples.append(np.vstack([np.asarray(pts), np.asarray(part.vertices)]))
        areas.append(float(part.area))
    floating = geometry.floating_parts(samples, areas, tolerance) if len(parts) <= max_parts else []
    out.update(
        n_parts=len(parts), n_floating=len(floating), floating=floating, extent=extent,
        area=float(mesh.area), n_vertices=int(len(mesh.vertices)), n_faces=int(len(mesh.faces)),
        parts_checked=min(len(parts), max_parts),
    )  # fmt: skip
    out["thumbs"] = write_thumbs(job_dir, VIEW_NAMES, int(job.get("thumb_size", 64)), bool(job.get("full_views")))
    out["seconds"] = time.monotonic() - t0
    write_json(os.path.join(job_dir, "analysis.json"), out)


def write_thumbs(job_dir: str, names: tuple[str, ...] | list[str], size: int, full: bool = False) -> str:
    """thumbs.npy: (V, size, size, 4) uint8; with ``full``, views.npy at the images' own size too
    (for embedding models on the host, which has no image decoder)."""
    thumbs, views = [], []
    for name in names:
        with Image.open(os.path.join(job_dir, name)) as im:
            rgba = im.convert("RGBA")
            # Image.BILINEAR / BICUBIC (kept for older Pillows): set at import time, so not in Pillow's types
            thumbs.append(np.asarray(rgba.resize((size, size), Image.BILINEAR), dtype=np.uint8))  # type: ignore[attr-defined]
            if full:
                side = max(rgba.size)
                views.append(np.asarray(rgba.resize((side, side), Image.BICUBIC), dtype=np.uint8))  # type: ignore[attr-defined]
    path = os.path.join(job_dir, "thumbs.npy")
    np.save(path, np.stack(thumbs))
    if full:
        np.save(os.path.join(job_dir, "views.npy"), np.stack(views))
    return path


def thumbs_child(job: dict, job_dir: str) -> None:
    write_thumbs(job_dir, job["files"], int(job.get("thumb_size", 64)), bool(job.get("full_views")))
    write_json(os.path.join(job_dir, "analysis.json"), {"thumbs": os.path.join(job_dir, "thumbs.npy")})


def sweep() -> None:
    """Kill whatever the job left behind, until nothing is left (a fork loop may add processes
    while we kill). Only as the PID namespace's init: elsewhere /proc is the host's."""
    if os.getpid() != 1:
        return
    for _ in range(100):
        others = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) != 1]
        if not others:
            break
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reap()
        time.sleep(0.005)
    reap()


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def run_forked(target, job: dict, job_dir: str, limits: dict[str, float]) -> tuple[str | None, float]:
    """Fork ``target(job, job_dir)``; kill it when a phase outlives its limit. Returns (phase it was
    killed in or None, seconds)."""
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            PROTOCOL.close()
            os.chdir(job_dir)
            target(job, job_dir)
        finally:
            os._exit(0)
    phase_file = os.path.join(job_dir, "phase.json")
    phase, phase_start = "exec" if "exec" in limits else "analyse", start
    killed = None
    while True:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        try:
            with open(phase_file) as fh:
                now_phase = json.load(fh)["phase"]
            if now_phase != phase:
                phase, phase_start = now_phase, time.monotonic()
        except (OSError, ValueError, KeyError):
            pass
        limit = limits.get(phase, limits.get("render", 60.0))
        if time.monotonic() - phase_start > limit:
            killed = phase
            for sig_target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    sig_target()
                except OSError:
                    pass
            os.waitpid(pid, 0)
            break
        time.sleep(0.01)
    sweep()
    return killed, time.monotonic() - start


def handle(job: dict) -> dict:
    job_dir = os.path.abspath(os.path.join("jobs", str(job["id"])))
    os.makedirs(job_dir, exist_ok=True)
    if job.get("kind") == "thumbs":
        killed, seconds = run_forked(thumbs_child, job, job_dir, {"analyse": float(job.get("analyse_timeout", 60))})
        ok = os.path.exists(os.path.join(job_dir, "thumbs.npy"))
        return {"id": job["id"], "dir": job_dir, "status": "OK" if ok else "ERR_THUMBS", "seconds": seconds}
    limits = {
        "exec": float(job.get("exec_timeout", 60)),
        "export": float(job.get("render_timeout", 120)),
        "render": float(job.get("render_timeout", 120)),
    }
    killed, seconds = run_forked(run_job_child, job, job_dir, limits)
    result_file = os.path.join(job_dir, "result.json")
    result: dict[str, Any]
    if killed == "exec":
        result = {"status": "ERR_TIMEOUT", "error": f"script ran past {limits['exec']:.0f} s", "traceback": ""}
    elif killed:
        result = {"status": "ERR_RENDER", "error": f"{killed} ran past {limits[killed]:.0f} s", "traceback": ""}
    elif os.path.exists(result_file):
        with open(result_file) as fh:
            result = json.load(fh)
    else:
        result = {"status": "ERR_EXEC", "error": "the script's process died without a result (crash or "
                  "resource limit)", "traceback": ""}  # fmt: skip
    result.update(id=job["id"], dir=job_dir, seconds=seconds)
    if result.get("status") == "OK":
        killed, analyse_s = run_forked(analyse_child, job, job_dir, {"analyse": float(job.get("analyse_timeout", 120))})
        analysis_file = os.path.join(job_dir, "analysis.json")
        if not killed and os.path.exists(analysis_file):
            with open(analysis_file) as fh:
                result["analysis"] = json.load(fh)
        else:
            result["analysis_error"] = "analysis timed out" if killed else "analysis failed"
        result.setdefault("times", {})["analyse"] = analyse_s
    return result


def main() -> None:
    # not dumpable: a script's process (same uid) cannot ptrace the zygote or read its memory
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    bpy.ops.wm.read_factory_settings(use_empty=True)  # the clean, empty scene every job forks from
    reap()
    PROTOCOL.write(json.dumps({"ready": True, "pid": os.getpid(), "bpy": bpy.app.version_string}) + "\n")
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
            reply = handle(job)
        except Exception as exc:  # noqa: BLE001 - a broken job must not take the worker down
            reply = {"id": None, "status": "ERR_WORKER", "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc()}  # fmt: skip
        PROTOCOL.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
