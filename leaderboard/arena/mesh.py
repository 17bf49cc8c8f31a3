"""Meshes for the interactive 3D view: a minimal reader for binary glTF (GLB, what Blender
exports) and Wavefront OBJ, returning world-space triangles, and a plotly ``mesh3d`` figure.

Only vertex and face arrays leave the server: node and mesh names, the generator string and any
extras in the file (which a model's code chooses, and which could name it) are dropped.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

MAX_FACES = 60_000  # above this the figure is too heavy for a page; the renders still show
_COMPONENTS = {5120: np.int8, 5121: np.uint8, 5122: np.int16, 5123: np.uint16, 5125: np.uint32, 5126: np.float32}
_WIDTH = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}


class MeshError(ValueError):
    pass


def _accessor(doc: dict[str, Any], binary: bytes, index: int) -> np.ndarray:
    acc = doc["accessors"][index]
    view = doc["bufferViews"][acc["bufferView"]]
    dtype = np.dtype(_COMPONENTS[acc["componentType"]])
    width = _WIDTH[acc["type"]]
    start = view.get("byteOffset", 0) + acc.get("byteOffset", 0)
    stride = view.get("byteStride") or dtype.itemsize * width
    count = acc["count"]
    if stride == dtype.itemsize * width:
        flat = np.frombuffer(binary, dtype=dtype, count=count * width, offset=start)
        return flat.reshape(count, width) if width > 1 else flat
    rows = [np.frombuffer(binary, dtype=dtype, count=width, offset=start + i * stride) for i in range(count)]
    return np.stack(rows)


def _node_matrix(node: dict[str, Any]) -> np.ndarray:
    if "matrix" in node:
        return np.array(node["matrix"], dtype=float).reshape(4, 4).T  # glTF stores column-major
    t = np.eye(4)
    t[:3, 3] = node.get("translation", [0, 0, 0])
    x, y, z, w = node.get("rotation", [0, 0, 0, 1])
    r = np.eye(4)
    r[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                 [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                 [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    s = np.diag([*node.get("scale", [1, 1, 1]), 1.0])
    return t @ r @ s


def read_glb(path: Path) -> tuple[np.ndarray, np.ndarray]:
    data = path.read_bytes()
    if len(data) < 20 or data[:4] != b"glTF":
        raise MeshError("not a binary glTF file")
    pos, doc, binary = 12, None, b""
    while pos + 8 <= len(data):
        length, kind = struct.unpack("<II", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == 0x4E4F534A:
            doc = json.loads(chunk)
        elif kind == 0x004E4942:
            binary = chunk
        pos += 8 + length
    if doc is None:
        raise MeshError("GLB without a JSON chunk")
    verts, faces, offset = [], [], 0
    if doc.get("scenes"):
        roots = doc["scenes"][doc.get("scene", 0)].get("nodes", [])
    else:  # no scene: every node that is nobody's child
        children = {c for n in doc.get("nodes", []) for c in n.get("children", [])}
        roots = [i for i in range(len(doc.get("nodes", []))) if i not in children]

    def visit(index: int, parent: np.ndarray) -> None:
        nonlocal offset
        node = doc["nodes"][index]
        world = parent @ _node_matrix(node)
        if "mesh" in node:
            for prim in doc["meshes"][node["mesh"]]["primitives"]:
                if prim.get("mode", 4) != 4 or "POSITION" not in prim.get("attributes", {}):
                    continue  # triangles only
                p = _accessor(doc, binary, prim["attributes"]["POSITION"]).astype(float)
                idx = (_accessor(doc, binary, prim["indices"]).astype(np.int64) if "indices" in prim
                       else np.arange(len(p)))
                p = (np.c_[p, np.ones(len(p))] @ world.T)[:, :3]
                verts.append(p)
                faces.append(idx.reshape(-1, 3) + offset)
                offset += len(p)
        for child in node.get("children", []):
            visit(child, world)

    for root in roots:
        visit(root, np.eye(4))
    if not verts:
        raise MeshError("no triangle mesh in the file")
    return np.concatenate(verts), np.concatenate(faces)


def read_obj(path: Path) -> tuple[np.ndarray, np.ndarray]:
    verts, faces = [], []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("v "):
            verts.append([float(x) for x in line.split()[1:4]])
        elif line.startswith("f "):
            ids = [int(tok.split("/")[0]) for tok in line.split()[1:]]
            ids = [i - 1 if i > 0 else len(verts) + i for i in ids]
            faces += [[ids[0], ids[k], ids[k + 1]] for k in range(1, len(ids) - 1)]  # fan-triangulate
    if not verts or not faces:
        raise MeshError("no faces in the OBJ file")
    return np.array(verts, dtype=float), np.array(faces, dtype=np.int64)


def read_mesh(path: Path) -> tuple[np.ndarray, np.ndarray]:
    suffix = path.suffix.lower()
    if suffix == ".glb":
        return read_glb(path)
    if suffix == ".obj":
        return read_obj(path)
    raise MeshError(f"unsupported mesh format {suffix!r}")


def mesh_figure(vertices: np.ndarray, faces: np.ndarray) -> dict[str, Any]:
    """A plotly mesh3d figure; glTF is Y-up, so Y is drawn as the vertical axis."""
    if len(faces) > MAX_FACES:
        raise MeshError(f"mesh too large for the viewer ({len(faces)} faces)")
    v = np.round(vertices, 5)
    trace = {"type": "mesh3d", "x": v[:, 0].tolist(), "y": (-v[:, 2]).tolist(), "z": v[:, 1].tolist(),
             "i": faces[:, 0].tolist(), "j": faces[:, 1].tolist(), "k": faces[:, 2].tolist(),
             "color": "#94a3b8", "flatshading": True, "hoverinfo": "skip",
             "lighting": {"ambient": 0.45, "diffuse": 0.8, "specular": 0.2}}
    axis = {"visible": False}
    layout = {"margin": {"l": 0, "r": 0, "t": 0, "b": 0}, "height": 360, "paper_bgcolor": "white",
              "scene": {"xaxis": axis, "yaxis": axis, "zaxis": axis, "aspectmode": "data"}}
    return {"data": [trace], "layout": layout}
