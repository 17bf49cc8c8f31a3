"""2-Step Agent: every decision maker under every prior belief, against the no-support baseline,
through the harness runner (the task's own scorer), in one run; then a sweep of the policy belief.

Prints per prior and agent: outcome gain over no support with its 95% bootstrap CI, decision
accuracy (and its difference to no support), posterior error and the realised outcome. Usage:
``python bench/twostep.py [--agents 20000] [--seed 0] [--sweep-agents 5000]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from harness.runner import EvalConfig, Runner  # noqa: E402
from harness.store.db import open_db  # noqa: E402

AGENTS = ("no_support", "bayes", "naive")
PRIORS = ("aligned", "misaligned", "uninformative")
Row = dict[str, tuple[float, float | None, float | None]]


def run(sessions: Any, agent: str, options: dict[str, object]) -> Row:
    summary = Runner(EvalConfig(task="twostep", model=f"twostep:{agent}", task_options=options, progress=False),
                     session_factory=sessions).run()
    if summary.status != "finished" or summary.n_errors:
        raise SystemExit(f"twostep:{agent} {options}: {summary.status}, {summary.n_errors} errors")
    return {m.name: (m.value, m.ci_low, m.ci_high) for m in summary.metrics if not m.breakdown_key}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sweep-agents", type=int, default=5000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sessions = open_db(f"sqlite:///{tmp}/bench.db")
        print(f"{args.agents} agents (seed {args.seed}), true policy gamma = 1, ML model = least squares on 100 "
              "historical rows, cost 0")
        print(f"{'prior':14s} {'agent':11s} {'gain':>8s} {'95% CI':>19s} {'accuracy':>9s} {'Δacc':>7s} "
              f"{'post_err':>9s} {'outcome':>8s}")
        for prior in PRIORS:
            opts = {"prior": prior, "n_agents": args.agents, "seed": args.seed}
            rows = {agent: run(sessions, agent, opts) for agent in AGENTS}
            base = rows["no_support"]["decision_accuracy"][0]
            for agent, r in rows.items():
                g, lo, hi = r["outcome_gain"]
                print(f"{prior:14s} {agent:11s} {g:8.4f} [{lo:8.4f}, {hi:8.4f}] {r['decision_accuracy'][0]:9.4f} "
                      f"{r['decision_accuracy'][0] - base:+7.4f} {r['posterior_error'][0]:9.4f} {r['outcome'][0]:8.4f}")
        print(f"\nsweep of the policy belief gamma0 (twostep:bayes, {args.sweep_agents} agents, true gamma = 1)")
        print(f"{'gamma0':>7s} {'gain':>8s} {'95% CI':>19s} {'accuracy':>9s}")
        for g0 in (-2.0, -1.0, -0.5, -0.1, 0.0, 0.1, 0.5, 1.0, 2.0):
            r = run(sessions, "bayes", {"prior": "aligned", "gamma0": g0, "n_agents": args.sweep_agents,
                                        "seed": args.seed})
            g, lo, hi = r["outcome_gain"]
            print(f"{g0:7.2f} {g:8.4f} [{lo:8.4f}, {hi:8.4f}] {r['decision_accuracy'][0]:9.4f}")


if __name__ == "__main__":
    main()
