"""3DCodeBench: models write Blender code; it runs sandboxed, is rendered and measured (see README)."""
