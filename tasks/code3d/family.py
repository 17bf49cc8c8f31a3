"""Family manifest: 3DCodeBench (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family, LiveKind

FAMILY = Family(
    name="code3d",
    title="3DCodeBench",
    arena_display="render",  # in the arena: judged by looking at renders
    arena_category="3d",
    # the live 3DCodeArena: pool models write Blender code for the voter's prompt, both sides render in
    # the same sandboxed scene (the Blender pool queues jobs: a turn's renders may take minutes)
    live=(LiveKind("code3d", "3D code (Blender)", renderer="harness.tasks.code3d.arena:renderer",
                   render_timeout_s=900.0, category="3d"),),
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
