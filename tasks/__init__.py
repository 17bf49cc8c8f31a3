"""The task families: this folder is the package ``harness.tasks`` (setup.py maps it there)."""

# Imported under its folder's name (`import tasks` from the repository root) the same files would
# load a second time as other module objects: registrations would run twice and the types would differ.
if __name__ != "harness.tasks":
    raise ImportError(f"import harness.tasks..., not {__name__}...: this folder is harness.tasks")
