# Reference: a bookshelf built from boards (2 sides + 4 shelves = 6 parts, all touching).
import bpy


def board(location, size):
    bpy.ops.mesh.primitive_cube_add(size=1, location=location)
    bpy.context.active_object.scale = size


for x in (-0.5, 0.5):
    board((x, 0, 0.9), (0.04, 0.35, 1.8))
for z in (0.02, 0.6, 1.2, 1.78):
    board((0, 0, z), (0.96, 0.35, 0.04))
