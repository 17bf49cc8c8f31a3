"""Family manifest: grid puzzles for neural cellular automata (entry-point group ``harness.families``)."""

from harness.family import DemoRun, Family

FAMILY = Family(
    name="puzzles",
    title="Adaptive neural cellular automata on grid puzzles (mazes, sudoku)",
    arena_display="none",  # in the arena: outputs a person cannot compare (grids)
    tasks=("harness.tasks.puzzles.tasks",),
    backends=("harness.tasks.puzzles.backends",),
    demo=(
        DemoRun("maze_path", "anca", options={"n_train": 32, "n_test": 4, "test_sizes": "16"}, settings={"iters": 20},
                full_options={"n_train": 64, "n_test": 8}, full_settings={"iters": 60}, needs=("torch",),
                install="pip install torch"),
        DemoRun("maze_path", "nca", options={"n_train": 64, "n_test": 8, "test_sizes": "16"}, settings={"iters": 60},
                size="full",
                needs=("torch",), install="pip install torch"),
    ),
)
