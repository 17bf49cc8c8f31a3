"""P-NCM bounds against the known-graph NCM, the sharp LP (under the PAG and under the true graph)
and the Manski bounds, on the causal_bounds task, in one run.

``--pncm-class`` picks the P-NCM's reading of the PAG's class, one row each: ``enumerate`` (one NCM
pair per maximal member) and ``param`` (one NCM per sense over the parameterised class);
``--backends`` runs a subset (pncm, ncm, lp, lp_known, manski).

Every backend answers the same seeded SCMs (``--graphs``, ``--seeds`` per graph, ``--query``);
prints per backend and graph: validity, mean width, mean distance of the bounds' ends from the sharp
LP bounds of the same information, identified share (where the information identifies the query),
seconds per problem, and the width ratio against the matching LP (P-NCM / LP-under-PAG, NCM /
LP-with-graph; 1 = sharp). Defaults take about 6-8 minutes on a loaded 2-core machine.

    python bench/causal_bounds.py [--graphs iv,frontdoor,backdoor,bow,chain] [--seeds 2]
                                  [--query ate|pyx|ett|pn|ps|pns]
                                  [--iters 1000] [--n 0] [--restarts 2]
                                  [--pncm-class enumerate,param] [--backends pncm,ncm,lp,lp_known,manski]
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
    ap.add_argument("--restarts", type=int, default=2, help="NCM seeds per sense")
    ap.add_argument("--pncm-class", default="enumerate,param",
                    help="the P-NCM's readings of the class, comma list of enumerate, param")
    ap.add_argument("--backends", default="pncm,ncm,lp,lp_known,manski")
    args = ap.parse_args()
    classes = [c.strip() for c in args.pncm_class.split(",") if c.strip()]
    wanted = {b.strip() for b in args.backends.split(",")}
    bad = [c for c in classes if c not in ("enumerate", "param")] + sorted(
        wanted - {"pncm", "ncm", "lp", "lp_known", "manski"})
    if bad:
        ap.error(f"unknown --pncm-class / --backends value(s): {', '.join(bad)}")

    from harness.runner import EvalConfig, Runner
    from harness.store import ops
    from harness.store.db import open_db

    ncm = {"iters": args.iters, "restarts": args.restarts}
    backends = [("pncm", ncm | {"class": c}) for c in classes] * ("pncm" in wanted)
    backends += [("ncm:known_graph", ncm)] * ("ncm" in wanted) + [("bounds:lp", {})] * ("lp" in wanted)
    backends += [("bounds:lp", {"information": "known_graph"})] * ("lp_known" in wanted)
    backends += [("bounds:manski", {})] * ("manski" in wanted)
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
            outside = sum(int((r.details or {}).get("nonmember_modes", 0)) for r in recs)
            print(f"{name}: {summary.n_new} problems, {summary.n_errors} errors"
                  + (f", {outside} replica modes outside the class" if settings.get("class") == "param" else ""),
                  flush=True)

    def mean(vals: list[float]) -> float:
        return sum(vals) / len(vals) if vals else float("nan")

    print(f"\nquery={args.query} seeds/graph={args.seeds} n={args.n or 'exact'} iters={args.iters}")
    head = f"{'backend':52s} {'graph':10s} {'valid':>6s} {'width':>7s} {'to_sharp':>9s} {'ident':>6s} {'sec':>7s}"
    print(head)
    for name, by_graph in rows.items():
        for g in [*args.graphs.split(","), "all"]:
            sc = [x for v in by_graph.values() for x in v] if g == "all" else by_graph.get(g, [])
            ident = [x["identified"] for x in sc if "identified" in x]
            print(f"{name:52s} {g:10s} {mean([x['valid'] for x in sc]):6.2f} {mean([x['width'] for x in sc]):7.3f} "
                  f"{mean([x.get('bound_error', float('nan')) for x in sc]):9.4f} "
                  f"{(f'{mean(ident):.2f}' if ident else '-'):>6s} {mean([x.get('seconds', 0.0) for x in sc]):7.2f}")
    print("\nwidth ratio against the sharp LP of the same information (1 = sharp):")
    pairs = [(f"pncm?iters={args.iters},restarts={args.restarts},class={c}", "bounds:lp") for c in classes]
    pairs.append((f"ncm:known_graph?iters={args.iters},restarts={args.restarts}", "bounds:lp?information=known_graph"))
    for ours, ref in pairs:
        if ours not in rows or ref not in rows:
            continue
        for g in args.graphs.split(","):
            w = mean([x["width"] for x in rows[ours].get(g, [])])
            w_ref = mean([x["width"] for x in rows[ref].get(g, [])])
            ratio = "identified" if w_ref < 1e-6 else f"{w / w_ref:.3f}"
            print(f"  {ours:50s} / {ref:34s} {g:10s} {ratio}")


if __name__ == "__main__":
    main()
