"""Family manifest: grid puzzles for neural cellular automata (entry-point group ``harness.families``)."""

from harness.family import Family

FAMILY = Family(
    name="puzzles",
    title="Adaptive neural cellular automata on grid puzzles (mazes, sudoku)",
    tasks=("harness.tasks.puzzles.tasks",),
    backends=("harness.tasks.puzzles.backends",),
)
