"""The core's own subcommands besides those in :mod:`harness.cli`: the leaderboard (serve, push,
tokens) and the arena. Families add theirs through their manifests, other packages through the
``harness.cli`` entry-point group."""
