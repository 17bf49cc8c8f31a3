"""P-NCM bounds against the known-graph NCM, the sharp LP (under the PAG and under the true graph)
and the Manski bounds, on the causal_bounds task, in one run.

Every backend answers the same seeded SCMs (``--graphs``, ``--seeds`` per graph, ``--query``);
prints per backend and graph: validity, mean width, mean distance of the bounds' ends from the sharp
LP bounds of the same information, identified share (where the information identifies the query),
seconds per problem, and the width ratio against the matching LP (P-NCM / LP-under-PAG, NCM /
LP-with-graph; 1 = sharp). Defaults take about 6-8 minutes on a loaded 2-core machine.

    python bench/causal_bounds.py [--graphs iv,frontdoor,backdoor,bow,chain] [--seeds 2]
                                  [--query ate|pyx|ett|pn|ps|pns]
                                  [--iters 1000] [--n 0]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import tempfile  # noqa: E402
from collections import defaultdict  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", default="iv,frontdoor,backdoor,bow,chain")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--query", default="ate", choices=["ate", "pyx", "ett", "pn", "ps", "pns"])
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--n", type=int, default=0, help="samples per SCM (0: the exact distribution)")
    args = ap.parse_args()

    from harness.runner import EvalConfig, Runner
    from harness.store import ops
    from harness.store.db import open_db

    backends = [("pncm", {"iters": args.iters}), ("ncm:known_graph", {"iters": args.iters}),
                ("bounds:lp", {}), ("bounds:lp", {"information": "known_graph"}), ("bounds:manski", {})]
    opts = {"graph": args.graphs, "seeds": args.seeds, "query": args.query, "n": args.n}
    with tempfile.TemporaryDirectory() as tmp:
        sessions = open_db(f"sqlite:///{tmp}/bench.db")
        rows: dict[str, dict[str, list[dict[str, float]]]] = {}
        for spec, settings in backends:
            name = spec + ("?" + ",".join(f"{k}={v}" for k, v in settings.items()) if settings else "")
            summary = Runner(EvalConfig(task="causal_bounds", model=spec, task_options=opts,
                                        model_settings=settings, progress=False, use_cache=False),
                             session_factory=sessions).run()
            with sessions() as s:
                recs = ops.load_records(s, summary.run_id)
            by_graph: dict[str, list[dict[str, float]]] = defaultdict(list)
            for r in recs:
                by_graph[r.sample_id.split("-")[0]].append(dict(r.scores or {}))
            rows[name] = by_graph
            print(f"{name}: {summary.n_new} problems, {summary.n_errors} errors", flush=True)

    def mean(vals: list[float]) -> float:
        return sum(vals) / len(vals) if vals else float("nan")

    print(f"\nquery={args.query} seeds/graph={args.seeds} n={args.n or 'exact'} iters={args.iters}")
    head = f"{'backend':34s} {'graph':10s} {'valid':>6s} {'width':>7s} {'to_sharp':>9s} {'ident':>6s} {'sec':>7s}"
    print(head)
    for name, by_graph in rows.items():
        for g in [*args.graphs.split(","), "all"]:
            sc = [x for v in by_graph.values() for x in v] if g == "all" else by_graph.get(g, [])
            ident = [x["identified"] for x in sc if "identified" in x]
            print(f"{name:34s} {g:10s} {mean([x['valid'] for x in sc]):6.2f} {mean([x['width'] for x in sc]):7.3f} "
                  f"{mean([x.get('bound_error', float('nan')) for x in sc]):9.4f} "
                  f"{(f'{mean(ident):.2f}' if ident else '-'):>6s} {mean([x.get('seconds', 0.0) for x in sc]):7.2f}")
    print("\nwidth ratio against the sharp LP of the same information (1 = sharp):")
    for ours, ref in ((f"pncm?iters={args.iters}", "bounds:lp"),
                      (f"ncm:known_graph?iters={args.iters}", "bounds:lp?information=known_graph")):
        for g in args.graphs.split(","):
            w = mean([x["width"] for x in rows[ours].get(g, [])])
            w_ref = mean([x["width"] for x in rows[ref].get(g, [])])
            ratio = "identified" if w_ref < 1e-6 else f"{w / w_ref:.3f}"
            print(f"  {ours:30s} / {ref:34s} {g:10s} {ratio}")


if __name__ == "__main__":
    main()
