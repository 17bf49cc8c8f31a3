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
