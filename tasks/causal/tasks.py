"""``causal_bounds``: bound an interventional or counterfactual query of a seeded binary SCM from
observational data and a PAG.

Per sample (one SCM): the structure family (``-T graph=iv|frontdoor|backdoor|bow|chain|all``), a
seeded random SCM on it (see scm.py), its exact observational distribution (``-T n=0``, the
default: partial identification proper) or the frequencies of N samples from it (``-T n=20000``),
the PAG (``-T pag_source=true``: causal-learn's dag2pag of the true diagram; ``fci``: learned by FCI
from the samples; or ``-T pag='A o-> B; ...'`` for one graph) and the query (``-T query=ate|pyx``, or
the counterfactual ``ett|pn|ps|pns`` of counterfactual.py).
The true diagram travels too, for the ``ncm:known_graph`` oracle only.

Ground truth in the target: the true value, the sharp LP bounds on the true distribution under the
PAG (union over the class's maximal members) and under the true diagram, and the no-assumption
(Manski) bounds. Scores: ``valid`` (true value within the bounds, up to 1e-6 for the LP solver's
precision), ``width``, ``excess_width``
(width minus the sharp width for the backend's information, PAG or known graph), ``bound_error``
(largest distance of either end from the sharp bounds), ``manski_ratio`` (width / Manski width) and,
only where that information identifies the query, ``identified`` (the bounds' gap is at most 0.05).
With samples (n > 0) an identified query's point estimate misses the truth by sampling error, so
``valid_sampling`` also counts the truth within 3 / sqrt(n) of the bounds (a rough allowance: six
standard errors of a proportion).
"""

from __future__ import annotations

import re
from typing import Any

from harness.registry import task
from harness.task import ScoreContext, Task
from harness.tasks.causal.counterfactual import CF_QUERIES
from harness.tasks.causal.graphs import GRAPHS
from harness.tasks.causal.scm import QUERIES
from harness.types import (
    GenerationConfig,
    Message,
    Output,
    Part,
    Request,
    Sample,
    Score,
    higher,
    lower,
    neutral,
    stable_hash,
)

IDENTIFIED_GAP = 0.05
QUERY_TEXT = {
    "pyx": "P(Y=1 | do(X=1))",
    "ate": "the ATE of X on Y",
    "ett": "the effect of treatment on the treated E[Y_1 - Y_0 | X=1] (Y_x: Y under do(X=x))",
    "pn": "the probability of necessity P(Y_0=0 | X=1, Y=1) (Y_x: Y under do(X=x))",
    "ps": "the probability of sufficiency P(Y_1=1 | X=0, Y=0) (Y_x: Y under do(X=x))",
    "pns": "the probability of necessity and sufficiency P(Y_1=1, Y_0=0) (Y_x: Y under do(X=x))",
}
_NUM = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
PAG_SOURCES = ("true", "fci")
_NUM_TOL = 1e-6  # the LP solver's precision: a point bound may miss the truth by ~1e-9


def _build_samples(graphs: list[str], query: str, seeds: int, n: int, pag_source: str, pag_text: str | None,
                   seed: int) -> list[Sample]:
    from harness.tasks.causal.graphs import check_pag, maximal, pag_from_fci, pag_of, parse_pag
    from harness.tasks.causal.lp import class_bounds, lp_bounds
    from harness.tasks.causal.problem import Problem
    from harness.tasks.causal.scm import counts_to_rows, manski, random_scm, sample_counts

    out = []
    for g in graphs:
        d = GRAPHS[g]
        for s in range(seed, seed + seeds):
            scm = random_scm(d, 1000 * (list(GRAPHS).index(g) + 1) + s)
            p = scm.joint()
            if n > 0:
                counts = sample_counts(p, n, s)
                obs = counts / counts.sum()
            else:
                counts, obs = None, p
            if pag_text is not None:
                pag = parse_pag(pag_text, d.names)
            elif pag_source == "fci":
                pag = pag_from_fci(counts_to_rows(counts, len(d.names)) if counts is not None
                                   else counts_to_rows(sample_counts(p, 20000, s), len(d.names)), d.names)
            else:
                pag = pag_of(d)
            try:
                lp_pag = class_bounds(maximal(check_pag(pag)), p, query)[0].lower_upper()
            except ValueError:
                lp_pag = None  # a learned "PAG" no diagram has: the backends answer with an error row
            known = lp_bounds(d, p, query)
            prob = Problem(d.names, [float(v) for v in obs], n, str(pag), str(d), query)
            text = (f"Binary variables {', '.join(d.names)}; PAG: {pag}. Bound "
                    f"{QUERY_TEXT[query]} from the observed "
                    f"distribution (configurations k with v_i = bit i of k): {', '.join(f'{v:.5f}' for v in obs)}. "
                    "Reply with [lower, upper].")
            target = {"truth": scm.query(query), "lp_pag": lp_pag, "lp_known_graph": [known.lower, known.upper],
                      "manski": list(manski(p, d.names, query))}
            meta = {"graph": g, "query": query, "scm_seed": s, "n": n,
                    "identified_pag": lp_pag is not None and lp_pag[1] - lp_pag[0] <= 1e-6,
                    "identified_known_graph": known.upper - known.lower <= 1e-6}
            if query in CF_QUERIES:  # merged c-components make the LP an outer bound (lp_counterfactual.py)
                meta["lp_known_graph_sharp"] = known.sharp
            out.append(Sample(f"{g}-{query}-s{s}", [Message("user", [Part("text", text, options=prob.to_options())])],
                              target=target, metadata=meta))
    return out


def _bounds_of(output: Output) -> tuple[float, float, str] | None:
    pred = output.prediction
    if isinstance(pred, dict) and "lower" in pred and "upper" in pred:
        return float(pred["lower"]), float(pred["upper"]), str(pred.get("information", "pag"))
    nums = _NUM.findall(output.text or "")
    if len(nums) >= 2:
        lo, hi = float(nums[-2]), float(nums[-1])
        return min(lo, hi), max(lo, hi), "pag"
    return None


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    got = _bounds_of(output)
    if got is None:
        return Score.not_scored("no [lower, upper] bounds in the reply")
    lo, hi, info = got
    t = sample.target
    sharp = t["lp_known_graph"] if info == "known_graph" else t["lp_pag"]
    truth, width = float(t["truth"]), hi - lo
    m_lo, m_hi = t["manski"]
    values = {"valid": float(lo - _NUM_TOL <= truth <= hi + _NUM_TOL), "width": width,
              "manski_ratio": width / max(m_hi - m_lo, 1e-12)}
    n = int(sample.metadata.get("n", 0))
    if n > 0:
        tol = 3.0 / n**0.5
        values["valid_sampling"] = float(lo - tol <= truth <= hi + tol)
    if isinstance(output.prediction, dict) and "seconds" in output.prediction:
        values["seconds"] = float(output.prediction["seconds"])
    if sharp is not None:
        values["excess_width"] = width - (sharp[1] - sharp[0])
        values["bound_error"] = max(abs(lo - sharp[0]), abs(hi - sharp[1]))
        if sharp[1] - sharp[0] <= 1e-6:
            values["identified"] = float(width <= IDENTIFIED_GAP)
    details: dict[str, Any] = {"information": info, "sharp": sharp, "truth": truth}
    if isinstance(output.prediction, dict):  # pncm -M class=param: whether the learned structures stayed in the class
        details |= {k: output.prediction[k] for k in ("nonmember_modes", "redrawn") if k in output.prediction}
    return Score(values=values, answer=f"[{lo:.4f}, {hi:.4f}]", details=details)


def make_task(graph: str = "all", query: str = "ate", seeds: int = 3, n: int = 0, pag_source: str = "true",
              pag: str | None = None, seed: int = 0) -> Task:
    graphs = list(GRAPHS) if graph == "all" else [g.strip() for g in str(graph).split(",")]
    for g in graphs:
        if g not in GRAPHS:
            raise ValueError(f"unknown graph {g!r}; choose from {', '.join(GRAPHS)} or all")
    if query not in QUERIES:
        raise ValueError(f"unknown query {query!r}; choose one of {', '.join(QUERIES)}")
    if pag_source not in PAG_SOURCES:
        raise ValueError(f"unknown pag_source {pag_source!r}; choose one of {', '.join(PAG_SOURCES)}")
    seeds, n, seed = int(seeds), int(n), int(seed)
    if seeds < 1 or n < 0:
        raise ValueError("seeds must be >= 1 and n >= 0 (0: the exact distribution)")
    if pag is not None:
        from harness.tasks.causal.graphs import check_pag, parse_pag

        if len(graphs) != 1:
            raise ValueError("-T pag=... needs a single -T graph=...")
        check_pag(parse_pag(str(pag), GRAPHS[graphs[0]].names))  # a non-PAG string fails here, in one line
    cache: dict[str, list[Sample]] = {}

    def load() -> list[Sample]:
        if "s" not in cache:
            cache["s"] = _build_samples(graphs, query, seeds, n, pag_source, pag, seed)
        return cache["s"]

    def prompt(sample: Sample) -> Request:
        return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=32))

    options: dict[str, Any] = {"graph": graph, "query": query, "seeds": seeds, "n": n, "pag_source": pag_source,
                               "pag": pag, "seed": seed}
    return Task(
        version="1", load=load, prompt=prompt, score=score, primary_metric="valid",
        metrics={"valid": higher("Valid (truth inside)"), "valid_sampling": higher("Valid within 3/sqrt(n)"),
                 "width": lower("Width"),
                 "excess_width": lower("Width over sharp"), "bound_error": lower("Distance to sharp bounds"),
                 "manski_ratio": lower("Width / Manski width"), "identified": higher("Identified (gap <= 0.05)"),
                 "seconds": neutral("Seconds")},
        breakdowns=("graph",), content_hash=stable_hash({"task": "causal_bounds", **options, "v": 1}),
        options=options)


@task("causal_bounds", description="Bounds on an interventional or counterfactual query of seeded binary SCMs from "
      "data + a PAG (validity, width, excess over the sharp LP bounds)", family="causal")
def causal_bounds(graph: str = "all", query: str = "ate", seeds: int = 3, n: int = 0, pag_source: str = "true",
                  pag: str | None = None, seed: int = 0) -> Task:
    return make_task(graph, query, seeds, n, pag_source, pag, seed)
