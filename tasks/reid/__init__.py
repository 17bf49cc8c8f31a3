"""Cross-view (aerial-ground) person re-identification: the ReID evaluation, a Blender-rendered synthetic
aerial-ground benchmark, and fit-then-embed backends (a CNN baseline and 3D-VITAL)."""
