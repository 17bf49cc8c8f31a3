"""3DCodeBench: models write Blender code; it runs sandboxed, is rendered and measured (see README)."""

from harness.tasks.code3d.task import code3d, code3d_image, code3d_refine

__all__ = ["code3d", "code3d_image", "code3d_refine"]
