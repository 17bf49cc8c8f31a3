"""Grid puzzles (mazes, sudoku) for iterated networks: adaptive NCAs, NCAs and feed-forward CNNs."""
