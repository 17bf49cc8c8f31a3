# Reference: a mug, one open-topped body with thickness and a torus handle through its wall
# (2 parts, touching; none float).
import bmesh
import bpy

bpy.ops.mesh.primitive_cylinder_add(radius=0.4, depth=0.9, location=(0, 0, 0.45), vertices=48)
body = bpy.context.active_object
bm = bmesh.new()
bm.from_mesh(body.data)
bmesh.ops.delete(bm, geom=[f for f in bm.faces if f.calc_center_median().z > 0.44], context="FACES")
bm.to_mesh(body.data)
bm.free()
body.modifiers.new("shell", "SOLIDIFY").thickness = 0.04
bpy.ops.mesh.primitive_torus_add(
    major_radius=0.22, minor_radius=0.05, location=(0.45, 0, 0.45), rotation=(1.5708, 0, 0)
)
