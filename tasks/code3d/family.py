"""Family manifest: 3DCodeBench (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="code3d",
    title="3DCodeBench",
    tasks=("harness.tasks.code3d.task",),
    backends=("harness.tasks.code3d.standin",),
    cli="harness.tasks.code3d.cli:code3d_app",
    # two stand-in code writers on the shipped objects: real renders for the demo's 3D arena battles
    demo=tuple(
        DemoRun("code3d", f"code3d-standin:{kind}", options={"size": 96, "samples": 4}, limit=3,
                full_options={"size": 256, "samples": 16}, full_limit=5, needs=("blender",), renders_3d=True)
        for kind in ("faithful", "dropped")
    ),
)
