"""Failure taxonomy from a failed run's status and traceback (the paper groups failures this way;
its exact rules are not public, so these are ours):

* ``timeout``    ERR_TIMEOUT;
* ``syntax``     SyntaxError / IndentationError / TabError (the reply is not valid Python);
* ``no_mesh``    ERR_NO_MESH (ran clean, left no mesh);
* ``render``     ERR_RENDER (exported or rendered badly: NaN/infinite extent, export failure);
* ``memory``     MemoryError (the sandbox's address-space limit);
* ``api_misuse`` the exception was raised inside Blender's API (a frame in bpy's own files, an
  operator/property error, an unknown attribute of a bpy type, a failed bpy import);
* ``geometry``   an arithmetic/indexing error in the model's own geometry code (ValueError,
  ZeroDivisionError, IndexError, math domain errors) without a bpy frame;
* ``other``      anything else (NameError in the script's own code, sandbox denials, ...).
"""

from __future__ import annotations

import re

_LAST_EXC = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception|Exit|Interrupt)|[A-Z]\w*Error)\b", re.M)
_API_HINTS = (
    "bpy",
    "operator",
    "bmesh",
    "mathutils",
    "unrecognized",
    "RNA",
    "enum",
    "context is incorrect",
    "poll() failed",
    "bpy_struct",
    "bpy_prop",
)
_GEOMETRY_EXC = {"ValueError", "ZeroDivisionError", "IndexError", "OverflowError", "FloatingPointError"}


def last_exception(traceback: str, error: str = "") -> tuple[str, str]:
    """(exception type, message) of the last exception line in the traceback (or the error line)."""
    for text in (traceback, error):
        lines = [ln for ln in text.strip().splitlines() if ln and not ln.startswith(" ")]
        for line in reversed(lines):
            match = _LAST_EXC.match(line)
            if match:
                return match.group(1).split(".")[-1], line[match.end() :].lstrip(": ")
    return "", error


def classify_failure(status: str, traceback: str, error: str = "") -> str | None:
    if status == "OK":
        return None
    if status == "ERR_TIMEOUT":
        return "timeout"
    if status == "ERR_NO_MESH":
        return "no_mesh"
    if status == "ERR_RENDER":
        return "render"
    exc, message = last_exception(traceback, error)
    if exc in ("SyntaxError", "IndentationError", "TabError"):
        return "syntax"
    if exc == "MemoryError":
        return "memory"
    frames = re.findall(r'File "([^"]+)"', traceback)
    in_bpy = bool(frames) and ("/bpy/" in frames[-1] or "/addons" in frames[-1] or "scripts/modules" in frames[-1])
    if in_bpy or (
        exc in ("AttributeError", "TypeError", "KeyError", "RuntimeError", "ImportError", "ModuleNotFoundError")
        and any(h in message for h in _API_HINTS)
    ):
        return "api_misuse"
    if exc in _GEOMETRY_EXC or "math domain" in message:
        return "geometry"
    return "other"


# The reference sub-divides ERR_EXEC by the exception line into four families (its
# metrics/failure_taxonomy.py): Blender 4 -> 5 API drift, bmesh state mistakes, wrong operator
# context, other. These patterns are ours, written from the same family definitions.
_EXEC_FAMILIES: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = (
    (
        "B5-API",
        tuple(
            re.compile(p)
            for p in (
                r'KeyError: .*key "(Specular|Subsurface[\w ]*|Transmission|Sheen[\w ]*|Clearcoat[\w ]*)" not found',
                r"has no attribute '(use_auto_smooth|auto_smooth_angle|calc_normals\w*|shade_smooth)'",
                r"has no attribute '(blend_method|shadow_method)'",
                r"'\w+Modifier' object has no attribute",
                r'enum "\w+" not found in',
                r"keyword \"?\w+\"? unrecognized|: keyword \"\w+\"",
                r"BMeshOpsModule: operator \"\w+\" doesn't exist",
                r"Node type \w+ undefined",
                r"cannot import name '\w+' from 'mathutils'",
                r"\.new\(\): error with keyword argument \"type\"",
            )
        ),
    ),
    (
        "BMSH",
        tuple(
            re.compile(p)
            for p in (
                r"outdated internal index table",
                r"BMesh data of type \w+ has been removed",
                r"StructRNA of type \w+ has been removed",
                r"faces\.new\(.*\): (face already exists|found the same)",
                r"KeyError: '(geom|verts|edges|faces|loops)'",
            )
        ),
    ),
    (
        "CTX",
        tuple(
            re.compile(p)
            for p in (
                r"execution context is supported",
                r"Operator bpy\.ops\.\S+ poll\(\) failed",
                r"context is incorrect",
            )
        ),
    ),
)


def exec_family(traceback: str, error: str = "") -> str:
    """The reference's ERR_EXEC family of a failure: B5-API, BMSH, CTX or OTHER."""
    exc, message = last_exception(traceback, error)
    line = f"{exc}: {message}" if exc else message
    for family, patterns in _EXEC_FAMILIES:
        if any(p.search(line) for p in patterns):
            return family
    return "OTHER"
