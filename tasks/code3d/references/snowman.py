# Reference: a snowman of three stacked spheres plus a cone nose (4 parts, touching; none float).
import bpy

bpy.ops.mesh.primitive_uv_sphere_add(radius=0.5, location=(0, 0, 0.5))
bpy.ops.mesh.primitive_uv_sphere_add(radius=0.35, location=(0, 0, 1.25))
bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, location=(0, 0, 1.8))
bpy.ops.mesh.primitive_cone_add(radius1=0.05, depth=0.2, location=(0.3, 0, 1.8), rotation=(0, 1.5708, 0))
