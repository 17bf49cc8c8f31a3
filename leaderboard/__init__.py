"""The web leaderboard: FastAPI app (``create_app``) over the results database. This folder is the
package ``harness.leaderboard`` (setup.py maps it there)."""

# Imported under its folder's name (`import leaderboard` from the repository root) the same files would
# load a second time as other module objects: registrations would run twice and the types would differ.
if __name__ != "harness.leaderboard":
    raise ImportError(f"import harness.leaderboard..., not {__name__}...: this folder is harness.leaderboard")
