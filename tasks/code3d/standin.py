"""Stand-in code writers for the offline reference set, so ``harness demo`` has real 3D objects to
render and compare without a language model.

- ``code3d-standin:faithful`` answers the shipped reference script of the object the prompt
  describes (its comments removed: they state the part counts the scorer checks);
- ``code3d-standin:dropped`` answers the same script with the part it creates last removed at
  the end (a table with three legs, a snowman without its nose, a mug without its handle, ...).

Renders of the two differ in a way a person sees at once against the description, which is what
the demo's 3D arena battles need. A prompt that describes no shipped object gets an empty reply
(the task scores it as code that does not run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.registry import model
from harness.tasks.code3d.data import load_offline
from harness.types import Output, Request, Usage

KINDS = ("faithful", "dropped")
# removes the mesh object created last (Blender hands out session ids in creation order)
DROP_LAST = """

_meshes = [o for o in bpy.data.objects if o.type == "MESH"]
if len(_meshes) > 1:
    bpy.data.objects.remove(max(_meshes, key=lambda o: o.session_uid), do_unlink=True)
"""


def _without_comments(script: str) -> str:
    return "\n".join(ln for ln in script.splitlines() if not ln.lstrip().startswith("#")).strip() + "\n"


@dataclass
class StandIn:
    kind: str
    spec: str
    batch_size: int = 64
    concurrency: int = 1
    scripts: dict[str, str] = field(default_factory=dict)  # object description -> its script
    modalities: frozenset[str] = field(default_factory=lambda: frozenset({"text", "image"}))

    def reply(self, request: Request) -> str:
        text = "\n".join(m.text_content for m in request.messages if m.role == "user")
        script = next((s for description, s in self.scripts.items() if description in text), "")
        if not script or self.kind == "faithful":
            return script
        return script + DROP_LAST

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        out = []
        for r in requests:
            text = self.reply(r)
            out.append(Output(text=text, usage=Usage(output_tokens=len(text.split()), calls=1)))
        return out


@model("code3d-standin", kind="stub", description="Stand-in Blender code for the shipped reference objects: "
       "code3d-standin:faithful | dropped (its last part removed)", settings={}, strict=True)
def code3d_standin(path: str | None = None, **settings: object) -> StandIn:
    kind = path or "faithful"
    if kind not in KINDS:
        raise ValueError(f"unknown code3d-standin kind {kind!r}; one of {', '.join(KINDS)}")
    if settings:  # generation keys too: the scripts are canned, a temperature would silently change nothing
        raise ValueError(f"code3d-standin takes no settings (got {', '.join(sorted(settings))})")
    scripts = {item.description: _without_comments(item.script) for item in load_offline()}
    return StandIn(kind=kind, spec=f"code3d-standin:{kind}", scripts=scripts)
