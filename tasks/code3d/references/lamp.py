# Reference: a floor lamp with a floating shade (3 parts: base, pole, shade; the shade hovers
# 0.1 above the pole's tip, so it is one floating part by the geometric check).
import bpy

bpy.ops.mesh.primitive_cylinder_add(radius=0.3, depth=0.06, location=(0, 0, 0.03))
bpy.ops.mesh.primitive_cylinder_add(radius=0.03, depth=1.5, location=(0, 0, 0.81))
bpy.ops.mesh.primitive_cone_add(radius1=0.35, radius2=0.15, depth=0.35, location=(0, 0, 1.835))
