"""Puzzles: the plain-torch deformable convolution against conv2d and gradcheck, the maze and sudoku
generators and checkers, the three networks training, and maze_path through the runner."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import pytest  # noqa: E402
import torch  # noqa: E402

from harness.runner import EvalConfig, Runner, build_task  # noqa: E402
from harness.store.db import open_db  # noqa: E402
from harness.tasks.puzzles.deform import deform_conv2d  # noqa: E402
from harness.tasks.puzzles.encode import maze_input, maze_target  # noqa: E402
from harness.tasks.puzzles.mazes import bfs, generate, is_shortest_path, parse_maze_file  # noqa: E402
from harness.tasks.puzzles.nets import build, n_params  # noqa: E402
from harness.tasks.puzzles.sudoku import count_solutions, is_solution, parse_sudoku_file  # noqa: E402
from harness.tasks.puzzles.sudoku import generate as generate_sudoku  # noqa: E402
from harness.tasks.puzzles.train import TrainConfig, train  # noqa: E402

torch.set_num_threads(1)


@pytest.mark.parametrize("k", [3, 5])
def test_deform_conv_is_conv2d_at_zero_offsets(k):
    g = torch.Generator().manual_seed(k)
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64, generator=g)
    w = torch.randn(4, 3, k, k, dtype=torch.float64, generator=g)
    b = torch.randn(4, dtype=torch.float64, generator=g)
    off = torch.zeros(2, 2 * k * k, 7, 6, dtype=torch.float64)
    torch.testing.assert_close(deform_conv2d(x, off, w, b), torch.nn.functional.conv2d(x, w, b, padding=k // 2),
                               rtol=0, atol=1e-12)


def test_deform_conv_integer_offsets_shift_and_gradcheck():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 2, 6, 7, dtype=torch.float64, generator=g)
    w = torch.randn(3, 2, 3, 3, dtype=torch.float64, generator=g)
    off = torch.zeros(1, 18, 6, 7, dtype=torch.float64)
    off[:, 1::2] = 1.0  # every tap reads one pixel to the right
    shifted = torch.nn.functional.conv2d(torch.nn.functional.pad(x, (0, 1))[..., 1:], w, padding=1)
    torch.testing.assert_close(deform_conv2d(x, off, w)[..., 1:], shifted[..., 1:], rtol=0, atol=1e-12)
    # away from pixel centres bilinear sampling is smooth, so gradcheck is meaningful there
    xx = torch.randn(1, 2, 5, 4, dtype=torch.float64, generator=g, requires_grad=True)
    oo = (0.2 + 0.6 * torch.rand(1, 18, 5, 4, dtype=torch.float64, generator=g)).requires_grad_()
    ww = torch.randn(3, 2, 3, 3, dtype=torch.float64, generator=g, requires_grad=True)
    bb = torch.randn(3, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(deform_conv2d, (xx, oo, ww, bb))


def test_mazes_are_solvable_seeded_and_labelled_with_a_shortest_path():
    for seed in range(30):
        m = generate(12, seed)
        assert m.to_dict() == generate(12, seed).to_dict()
        parent = bfs(m.walls, m.source)
        dist, c = 0, m.target
        while parent[c] is not None:
            c, dist = parent[c], dist + 1
        assert len(m.path) - 1 == dist and m.path[0] == m.source and m.path[-1] == m.target
        assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 for a, b in zip(m.path, m.path[1:], strict=False))
        assert all(m.walls[y][x] == 0 for y, x in m.path) and is_shortest_path(m, set(m.path))


def test_any_shortest_path_counts_and_longer_or_broken_ones_do_not():
    (m,) = parse_maze_file("#####\n#S..#\n#...#\n#..T#\n#####\n")
    assert len(m.path) == 5
    assert is_shortest_path(m, {(1, 1), (2, 1), (3, 1), (3, 2), (3, 3)})  # down then right
    assert is_shortest_path(m, {(1, 1), (1, 2), (1, 3), (2, 3), (3, 3)})  # right then down
    assert not is_shortest_path(m, {(1, 1), (1, 2), (2, 2), (3, 2), (3, 3), (2, 1)})  # one cell too many
    assert not is_shortest_path(m, {(1, 1), (1, 2), (2, 1), (3, 2), (3, 3)})  # right size, not connected


def test_unsolvable_puzzle_files_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="maze 2: unsolvable") as info:
        parse_maze_file("####\n#S.#\n#.T#\n####\n\n#####\n#S#.#\n###.#\n#..T#\n#####\n")
    assert "\n" not in str(info.value)
    bad = tmp_path / "bad.txt"
    bad.write_text("#####\n#S#.#\n###.#\n#..T#\n#####\n")
    with pytest.raises(ValueError, match="unsolvable"):
        build_task("maze_path", {"file": str(bad)})
    sud = generate_sudoku(3)
    broken = list(sud.puzzle)
    i = broken.index(0)
    broken[i] = next(d for d in range(1, 10) if d != sud.solution[i] and d in broken[(i // 9) * 9:(i // 9) * 9 + 9])
    with pytest.raises(ValueError, match="line 1: unsolvable"):
        parse_sudoku_file("".join(map(str, broken)))
    with pytest.raises(ValueError, match="more than one solution"):
        parse_sudoku_file("0" * 81)


def test_generated_sudokus_have_exactly_one_solution():
    for seed in range(5):
        s = generate_sudoku(seed, clues=36)
        assert s.blanks == 45
        n, sol = count_solutions(s.puzzle, limit=3)
        assert n == 1 and sol == s.solution and is_solution(s.puzzle, s.solution)
    assert not is_solution(s.puzzle, [1] * 81)


def test_networks_train_and_the_cnn_matches_the_anca_parameter_count():
    mazes = [generate(5, 500 + i) for i in range(32)]
    X, Y = torch.stack([maze_input(m) for m in mazes]), torch.stack([maze_target(m) for m in mazes])
    anca, cnn = build("anca", 3, 1), build("cnn", 3, 1)
    assert abs(n_params(cnn) - n_params(anca)) / n_params(anca) < 0.10  # the nearest width
    for arch in ("nca", "anca", "cnn"):
        cfg = TrainConfig(arch=arch, iters=20, batch=8, lr=1e-2, hidden=8, steps_per_cell=1.0)
        state, rec = train(cfg, "maze", X, Y)
        assert rec["final_loss"] < 0.7 * rec["first_loss"], (arch, rec)
        if arch == "anca":  # the offset predictor leaves zero: the perception deforms
            assert float(state["perceive.offset.weight"].abs().max()) > 0


def test_maze_path_through_the_runner_with_breakdowns_by_size(sqlite_url):
    sessions = open_db(sqlite_url)
    cfg = EvalConfig(task="maze_path", model="nca", progress=False,
                     task_options={"train_size": 6, "test_sizes": "6,9", "n_train": 32, "n_test": 3},
                     model_settings={"iters": 10})
    summary = Runner(cfg, session_factory=sessions).run()
    assert summary.n_new == 6 and summary.n_errors == 0
    sizes = {m.breakdown_value for m in summary.metrics if m.breakdown_key == "size" and m.name == "exact"}
    assert sizes == {"6", "9"}
    top = {m.name: m.value for m in summary.metrics if not m.breakdown_key}
    assert 0.0 <= top["exact"] <= 1.0 and 0.5 < top["cell_accuracy"] <= 1.0 and top["steps_to_converge"] >= 1
