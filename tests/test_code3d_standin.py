"""The demo's stand-in code writers for 3DCodeBench's shipped objects: the faithful one answers the
object's reference script, the other the same script with its last part removed; a prompt about no
shipped object gets nothing. (Their renders are checked where Blender is: tests/test_demo.py.)"""

from __future__ import annotations

import asyncio

import pytest

from harness.tasks.code3d.data import load_offline
from harness.tasks.code3d.standin import DROP_LAST, code3d_standin
from harness.types import Message, Request


def ask(model, text: str) -> str:
    return asyncio.run(model.generate([Request(messages=[Message.text("system", "Write Blender code."),
                                                         Message.text("user", text)])]))[0].text


def test_each_object_gets_its_script_and_the_other_one_loses_a_part() -> None:
    faithful, dropped = code3d_standin("faithful"), code3d_standin("dropped")
    for item in load_offline():
        code = ask(faithful, f"Create this object:\n{item.description}")
        assert "bpy.ops.mesh.primitive_" in code and "#" not in code  # comments state the part counts
        compile(code, item.id, "exec")
        assert ask(dropped, item.description) == code + DROP_LAST
    assert ask(faithful, "A spaceship with wings.") == ""
    # neither answer names its model (the arena would refuse to serve a battle that unmasks itself)
    assert "faithful" not in DROP_LAST and "dropped" not in DROP_LAST


def test_bad_specs_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="one of faithful, dropped"):
        code3d_standin("sideways")
    with pytest.raises(ValueError, match="takes no settings"):
        code3d_standin("faithful", temperature=0.7)
