"""The model backends: this folder is the package ``harness.models`` (setup.py maps it there)."""

# Imported under its folder's name (`import models` from the repository root) the same files would
# load a second time as other module objects: registrations would run twice and the types would differ.
if __name__ != "harness.models":
    raise ImportError(f"import harness.models..., not {__name__}...: this folder is harness.models")
