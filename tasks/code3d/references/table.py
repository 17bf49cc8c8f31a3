# Reference: a four-legged table (5 parts: top + 4 legs, legs touch the top; none float).
import bpy

bpy.ops.mesh.primitive_cube_add(size=1, location=(0, 0, 0.75))
top = bpy.context.active_object
top.scale = (1.2, 0.8, 0.05)
for x in (-0.55, 0.55):
    for y in (-0.35, 0.35):
        bpy.ops.mesh.primitive_cylinder_add(radius=0.04, depth=0.725, location=(x, y, 0.3625))
