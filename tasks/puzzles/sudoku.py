"""Seeded 9x9 sudoku generation with a unique solution, checked by a backtracking solver.

A grid is 81 ints in row-major order, 0 for a blank. ``generate(seed, clues)``: a random full grid
(backtracking over shuffled digits), then cells are blanked in a random order, each removal kept
only if the puzzle still has exactly one solution (:func:`count_solutions` stops at 2), until
``clues`` givens remain or no cell can go. The solver picks the blank with the fewest candidates
(bitmasks per row, column and box).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_ALL = 0x3FE  # bits 1..9


def _box(i: int) -> int:
    return (i // 27) * 3 + (i % 9) // 3


def _masks(grid: list[int]) -> tuple[list[int], list[int], list[int]] | None:
    rows, cols, boxes = [0] * 9, [0] * 9, [0] * 9
    for i, v in enumerate(grid):
        if v:
            bit = 1 << v
            r, c, b = i // 9, i % 9, _box(i)
            if rows[r] & bit or cols[c] & bit or boxes[b] & bit:
                return None  # a repeated given: no solution
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
    return rows, cols, boxes


def count_solutions(grid: list[int], limit: int = 2, rng: random.Random | None = None) -> tuple[int, list[int] | None]:
    """(number of solutions up to ``limit``, the first solution found)."""
    masks = _masks(grid)
    if masks is None:
        return 0, None
    rows, cols, boxes = masks
    g = list(grid)
    found: list[list[int]] = []

    def rec() -> int:
        best, best_cand, best_n = -1, 0, 10
        for i in range(81):
            if g[i] == 0:
                cand = _ALL & ~(rows[i // 9] | cols[i % 9] | boxes[_box(i)])
                n = bin(cand).count("1")
                if n < best_n:
                    best, best_cand, best_n = i, cand, n
                    if n <= 1:
                        break
        if best < 0:
            if not found:
                found.append(list(g))
            return 1
        if best_n == 0:
            return 0
        digits = [d for d in range(1, 10) if best_cand >> d & 1]
        if rng is not None:
            rng.shuffle(digits)
        total = 0
        r, c, b = best // 9, best % 9, _box(best)
        for d in digits:
            bit = 1 << d
            g[best] = d
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            total += rec()
            rows[r] &= ~bit
            cols[c] &= ~bit
            boxes[b] &= ~bit
            g[best] = 0
            if total >= limit:
                break
        return total

    n = rec()
    return n, (found[0] if found else None)


@dataclass
class Sudoku:
    puzzle: list[int]
    solution: list[int]

    @property
    def blanks(self) -> int:
        return sum(1 for v in self.puzzle if v == 0)


def generate(seed: int, clues: int = 36) -> Sudoku:
    rng = random.Random(seed)
    _, full = count_solutions([0] * 81, limit=1, rng=rng)
    assert full is not None
    puzzle = list(full)
    order = list(range(81))
    rng.shuffle(order)
    given = 81
    for i in order:
        if given <= clues:
            break
        keep = puzzle[i]
        puzzle[i] = 0
        if count_solutions(puzzle, limit=2)[0] != 1:
            puzzle[i] = keep
        else:
            given -= 1
    return Sudoku(puzzle, full)


def parse_sudoku_file(text: str) -> list[Sudoku]:
    """One puzzle per line: 81 characters, digits with ``0`` or ``.`` for a blank (spaces ignored).
    A puzzle without exactly one solution is a one-line ValueError naming its line."""
    out = []
    for ln, line in enumerate(text.splitlines(), 1):
        s = line.strip().replace(" ", "")
        if not s or s.startswith("#"):
            continue
        if len(s) != 81 or any(ch not in "0123456789." for ch in s):
            raise ValueError(f"line {ln}: a sudoku is 81 characters of digits and '.'")
        grid = [0 if ch == "." else int(ch) for ch in s]
        n, sol = count_solutions(grid, limit=2)
        if n == 0:
            raise ValueError(f"line {ln}: unsolvable sudoku")
        if n > 1:
            raise ValueError(f"line {ln}: the sudoku has more than one solution")
        assert sol is not None
        out.append(Sudoku(grid, sol))
    if not out:
        raise ValueError("no sudokus in the file")
    return out


def is_solution(puzzle: list[int], grid: list[int]) -> bool:
    """``grid`` keeps the givens and is a valid full sudoku."""
    if len(grid) != 81 or any(p and p != g for p, g in zip(puzzle, grid, strict=True)):
        return False
    if any(not 1 <= v <= 9 for v in grid):
        return False
    return _masks(grid) is not None
