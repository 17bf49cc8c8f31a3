"""Counterfactual queries in the causal family (ETT, PN, PS, PNS): the exact ground truth by
abduction-action-prediction, the twin-network LP against Tian & Pearl's closed forms, the truth
inside the LP bounds on random SCMs, the NCM's counterfactual as the SCM it is, a small NCM run, and
``harness eval -T query=ett -m bounds:lp`` into SQLite.

Closed forms (Tian & Pearl 2000, "Probabilities of causation: bounds and identification"), with
p_x = P(Y = 1 | X = x):
- X -> Y with arbitrary confounding, from P(x, y) alone: PNS in [0, P(X=1, Y=1) + P(X=0, Y=0)],
  PN and PS in [0, 1], ETT in [p_1 - 1, p_1];
- X -> Y unconfounded (exogeneity): PNS in [max(0, p_1 - p_0), min(p_1, 1 - p_0)], PN = PNS / p_1,
  PS = PNS / (1 - p_0) on the same interval, and ETT = p_1 - p_0 (identified);
- the backdoor graph (Z the only common cause of X and Y): the same per stratum z, averaged with
  P(z), P(z, X=1) / P(X=1, Y=1) and P(z, X=0) / P(X=0, Y=0), and ETT = sum_z P(z | X=1) (p_1z - p_0z);
- the front door X -> M -> Y, X <-> Y: ETT = p_1 - sum_m P(m | X=0) P(Y=1 | X=1, m) (identified).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from requirements import require  # noqa: E402

require("scipy", "the LP is scipy's HiGHS")

from harness.tasks.causal.counterfactual import CF_QUERIES, exact_table, state_weights, twin, value  # noqa: E402
from harness.tasks.causal.graphs import GRAPHS, check_pag, diagram, maximal, pag_of  # noqa: E402
from harness.tasks.causal.lp import class_bounds, lp_bounds  # noqa: E402
from harness.tasks.causal.lp_counterfactual import cf_bounds  # noqa: E402
from harness.tasks.causal.scm import QUERIES, SCM, configs, manski, random_scm  # noqa: E402

CONFOUNDED = diagram("XY", "X>Y", "X-Y")
UNCONFOUNDED = diagram("XY", "X>Y")
LP_TOL = 1e-7  # HiGHS's primal feasibility tolerance: the LP's ends sit this close to a closed form


def hand_worked() -> SCM:
    """X -> Y, X <-> Y through a fair latent U; P(X=1 | u) = 0.2, 0.8 for u = 0, 1;
    P(Y=1 | x, u) = 0.1, 0.5 (x = 0) and 0.6, 0.9 (x = 1), responses at different (x, u) independent."""
    return SCM(CONFOUNDED, [("X", "Y")], {"X": np.array([0.2, 0.8]), "Y": np.array([[0.1, 0.5], [0.6, 0.9]])})


def test_exact_counterfactuals_of_a_hand_worked_scm() -> None:
    # P(X=1) = .5(.2 + .8) = .5, so P(u=1 | X=1) = .8 and P(u=0 | X=1) = .2.
    # ETT = .2(.6 - .1) + .8(.9 - .5) = .1 + .32 = .42 (the ATE is .5(.5) + .5(.4) = .45).
    # PNS = sum_u .5 P(Y_1=1 | u) P(Y_0=0 | u) = .5(.6)(.9) + .5(.9)(.5) = .27 + .225 = .495.
    # PN: P(X=1, Y=1, Y_0=0) = .5(.2)(.6)(.9) + .5(.8)(.9)(.5) = .054 + .18 = .234 over
    #     P(X=1, Y=1) = .5(.2)(.6) + .5(.8)(.9) = .42: PN = .234 / .42 = .5571428...
    # PS: P(X=0, Y=0, Y_1=1) = .5(.8)(.9)(.6) + .5(.2)(.5)(.9) = .216 + .045 = .261 over
    #     P(X=0, Y=0) = .5(.8)(.9) + .5(.2)(.5) = .41: PS = .261 / .41 = .6365853...
    scm = hand_worked()
    expected = {"ett": 0.42, "pns": 0.495, "pn": 0.234 / 0.42, "ps": 0.261 / 0.41, "ate": 0.45, "pyx": 0.75}
    for query, want in expected.items():
        assert scm.query(query) == pytest.approx(want, abs=1e-12), query
    table = scm.counterfactual_table()
    assert table.sum() == pytest.approx(1.0, abs=1e-12)
    assert table[1, 1, 1, 0] == pytest.approx(0.234, abs=1e-12)  # X=1, Y=1 (so Y_1=1), Y_0=0
    assert table[1, 1, 0, :].sum() == 0.0  # consistency: a treated unit's Y is its Y_1
    assert set(CF_QUERIES) <= set(QUERIES) and QUERIES[:2] == ("ate", "pyx")


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_the_counterfactual_table_is_the_scm_the_interventional_queries_come_from(graph: str) -> None:
    """The exact table's margins are the observational and interventional distributions that
    ``joint`` gives (the ate/pyx ground truth), and the twin network reproduces the interventional LP."""
    d = GRAPHS[graph]
    V = configs(len(d.names))
    xi, yi = d.names.index("X"), d.names.index("Y")
    for seed in range(2):
        scm = random_scm(d, seed)
        table, p = scm.counterfactual_table(), scm.joint()
        for xv in (0, 1):
            for yv in (0, 1):
                assert table[xv, yv].sum() == pytest.approx(p[(V[:, xi] == xv) & (V[:, yi] == yv)].sum(), abs=1e-12)
        assert table[:, :, 1, :].sum() == pytest.approx(scm.joint({"X": 1})[V[:, yi] == 1].sum(), abs=1e-12)
        assert table[:, :, :, 1].sum() == pytest.approx(scm.joint({"X": 0})[V[:, yi] == 1].sum(), abs=1e-12)
        assert value("ate", table) == pytest.approx(scm.query("ate"), abs=1e-12)
        for query in ("ate", "pyx"):
            old, new = lp_bounds(d, p, query), cf_bounds(d, p, query)
            assert (new.lower, new.upper) == pytest.approx((old.lower, old.upper), abs=1e-8)


def _random_xy(rng: np.random.Generator) -> np.ndarray:
    return rng.dirichlet(np.ones(4))  # P(x, y) at k = x + 2y


EDGE_XY = [np.array(v) for v in ([0.5, 0.0, 0.0, 0.5],   # Y = X exactly
                                 [0.2, 0.0, 0.5, 0.3],   # every treated unit has Y = 1
                                 [0.0, 0.4, 0.6, 0.0],   # Y = 1 - X exactly
                                 [0.3, 0.3, 0.0, 0.4])]  # no untreated unit has Y = 1


def _confounded_closed_form(p: np.ndarray, query: str) -> tuple[float, float]:
    p00, p10, p01, p11 = p
    if query == "pns":
        return 0.0, p11 + p00
    if query == "ett":
        return p11 / (p11 + p10) - 1, p11 / (p11 + p10)
    return 0.0, 1.0


def _exogenous_closed_form(p: np.ndarray, query: str) -> tuple[float, float]:
    p00, p10, p01, p11 = p
    p1, p0 = p11 / (p11 + p10), p01 / (p01 + p00)
    lo, hi = max(0.0, p1 - p0), min(p1, 1 - p0)
    scale = {"pns": 1.0, "pn": p1, "ps": 1 - p0}
    if query == "ett":
        return p1 - p0, p1 - p0
    return lo / scale[query], hi / scale[query]


@pytest.mark.parametrize("query", CF_QUERIES)
def test_lp_equals_tian_pearl_on_x_to_y_with_and_without_confounding(query: str) -> None:
    rng = np.random.default_rng(11)
    for p in [_random_xy(rng) for _ in range(6)] + EDGE_XY:
        names = CONFOUNDED.names
        if (query == "pn" and p[3] == 0) or (query == "ps" and p[0] == 0):  # Y = 1 - X: nothing to condition on
            with pytest.raises(ValueError, match="undefined"):
                lp_bounds(CONFOUNDED, p, query)
            continue
        want = _confounded_closed_form(p, query)
        got = lp_bounds(CONFOUNDED, p, query)
        assert (got.lower, got.upper) == pytest.approx(want, abs=LP_TOL), p
        assert manski(p, names, query) == pytest.approx(want, abs=1e-12)
        if (p[[0, 2]] > 0).any() and (p[[1, 3]] > 0).any():  # both arms observed: p_0, p_1 defined
            ex = lp_bounds(UNCONFOUNDED, p, query)
            assert (ex.lower, ex.upper) == pytest.approx(_exogenous_closed_form(p, query), abs=LP_TOL), p


def test_an_undefined_conditional_query_is_a_one_line_error() -> None:
    p = np.array([0.4, 0.3, 0.3, 0.0])  # P(X=1, Y=1) = 0: PN conditions on an impossible event
    for fn in (lambda: lp_bounds(CONFOUNDED, p, "pn"), lambda: manski(p, CONFOUNDED.names, "pn")):
        with pytest.raises(ValueError, match=r"pn is undefined here: P\(X = 1, Y = 1\) = 0") as info:
            fn()
        assert "\n" not in str(info.value)
    assert lp_bounds(CONFOUNDED, p, "ps").upper == pytest.approx(1.0, abs=LP_TOL)  # P(X=0, Y=0) = .4: defined


def _strata(p: np.ndarray, names: tuple[str, ...]) -> dict[str, float]:
    V = configs(len(names))
    zi, xi, yi = names.index("Z"), names.index("X"), names.index("Y")

    def P(**fix: int) -> float:
        keep = np.ones(len(V), dtype=bool)
        for k, v in fix.items():
            keep &= V[:, {"z": zi, "x": xi, "y": yi}[k]] == v
        return float(p[keep].sum())

    lo = {q: 0.0 for q in CF_QUERIES}
    hi = {q: 0.0 for q in CF_QUERIES}
    for z in (0, 1):
        p1, p0 = P(z=z, x=1, y=1) / P(z=z, x=1), P(z=z, x=0, y=1) / P(z=z, x=0)
        a, b = max(0.0, p1 - p0), min(p1, 1 - p0)
        for q, w in (("pns", P(z=z)), ("pn", P(z=z, x=1) / P(x=1, y=1)), ("ps", P(z=z, x=0) / P(x=0, y=0))):
            lo[q] += w * a
            hi[q] += w * b
        lo["ett"] += P(z=z, x=1) / P(x=1) * (p1 - p0)
    hi["ett"] = lo["ett"]
    return {f"{q}_{end}": v[q] for q in CF_QUERIES for end, v in (("lo", lo), ("hi", hi))}


@pytest.mark.parametrize("seed", range(3))
def test_lp_equals_the_stratified_closed_forms_on_backdoor_and_identifies_front_door_ett(seed: int) -> None:
    d = GRAPHS["backdoor"]
    p = random_scm(d, seed).joint()
    want = _strata(p, d.names)
    for q in CF_QUERIES:
        b = lp_bounds(d, p, q)
        assert (b.lower, b.upper) == pytest.approx((want[f"{q}_lo"], want[f"{q}_hi"]), abs=LP_TOL), q
    fd = GRAPHS["frontdoor"]
    scm = random_scm(fd, seed)
    p = scm.joint()
    V = configs(3)
    xi, mi, yi = fd.names.index("X"), fd.names.index("M"), fd.names.index("Y")

    def P(mask: np.ndarray) -> float:
        return float(p[mask].sum())

    x1, y1 = V[:, xi] == 1, V[:, yi] == 1
    ett = P(x1 & y1) / P(x1) - sum(P((V[:, mi] == m) & ~x1) / P(~x1) * P(x1 & y1 & (V[:, mi] == m))
                                   / P(x1 & (V[:, mi] == m)) for m in (0, 1))
    b = lp_bounds(fd, p, "ett")
    assert b.sharp and (b.lower, b.upper) == pytest.approx((ett, ett), abs=LP_TOL)
    assert scm.query("ett") == pytest.approx(ett, abs=1e-12)


# a mediator with a second parent: the one c-component the LP merges (an outer bound, not sharp)
MERGED = diagram("ZXMY", "Z>M X>M M>Y", "X-Y")


@pytest.mark.parametrize("graph", [*GRAPHS, "merged"])
def test_the_truth_lies_in_the_lp_bounds_on_random_scms(graph: str) -> None:
    d = MERGED if graph == "merged" else GRAPHS[graph]
    members = maximal(check_pag(pag_of(d)))
    for seed in range(4):
        scm = random_scm(d, 100 + seed)
        p = scm.joint()
        for q in CF_QUERIES:
            truth, known = scm.query(q), lp_bounds(d, p, q)
            assert known.violation < 1e-9
            assert known.lower - 1e-9 <= truth <= known.upper + 1e-9, (q, truth, known)
            assert known.sharp == (graph != "merged")
            pag, _ = class_bounds(members, p, q)
            lo, hi = manski(p, d.names, q)
            assert pag.lower - 1e-9 <= known.lower and known.upper <= pag.upper + 1e-9
            assert lo - LP_TOL <= pag.lower and pag.upper <= hi + LP_TOL


def test_the_ncm_counterfactual_is_its_exact_scm_reading() -> None:
    """The NCM's differentiable twin-network query equals abduction-action-prediction over its own
    atoms and response functions (exact_table on ``mixture``), on untrained replicas of every graph."""
    torch = pytest.importorskip("torch")
    from harness.tasks.causal.ncm import _NCM, NCMConfig

    torch.set_num_threads(1)
    for g, d in GRAPHS.items():
        model = _NCM(d, NCMConfig(latent_points=3, width=4, seed=2), 2)
        tw = twin(d)
        for q in CF_QUERIES:
            with torch.no_grad():
                got = model.counterfactual(tw, *state_weights(tw, q)).tolist()
            want = [value(q, exact_table(d, model.mixture(r))) for r in range(2)]
            assert got == pytest.approx(want, abs=2e-5), (g, q)


def test_a_small_ncm_run_bounds_the_pns_around_the_truth() -> None:
    """1000 iterations, one restart per sense (about 25 s here): the bow's PNS bounds (the LP's:
    [0, P(X=1, Y=1) + P(X=0, Y=0)]) contain the truth and come within 0.03 of the sharp ends."""
    pytest.importorskip("torch")
    from harness.tasks.causal.ncm import NCMConfig, fit_bounds

    d = GRAPHS["bow"]
    scm = random_scm(d, 0)
    p = scm.joint()
    lp = lp_bounds(d, p, "pns")
    lo, hi = fit_bounds(d, p, "pns", NCMConfig(iters=1000, restarts=1))
    assert lo[0].kl < 5e-4 and hi[0].kl < 5e-4
    assert lo[0].value - 0.02 <= scm.query("pns") <= hi[0].value + 0.02
    assert abs(lo[0].value - lp.lower) < 0.03 and abs(hi[0].value - lp.upper) < 0.03


def test_harness_eval_ett_with_the_lp_into_sqlite(tmp_path: Path) -> None:
    from sqlalchemy import select

    from harness.store.db import open_db
    from harness.store.schema import MetricRow, RunRow, SampleResultRow

    db = f"sqlite:///{tmp_path / 'h.db'}"
    done = subprocess.run([str(Path(sys.executable).parent / "harness"), "eval", "-t", "causal_bounds",
                           "-T", "query=ett", "-T", "graph=backdoor,bow", "-T", "seeds=2", "-m", "bounds:lp",
                           "--db", db], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    sessions = open_db(db)
    with sessions() as s:
        (run,) = s.scalars(select(RunRow)).all()
        rows = s.scalars(select(SampleResultRow).where(SampleResultRow.run_id == run.id)).all()
        valid = s.scalars(select(MetricRow).where(MetricRow.run_id == run.id, MetricRow.name == "valid",
                                                  MetricRow.breakdown_key == "")).one()
    assert run.status == "finished" and run.n_errors == 0 and len(rows) == 4
    assert valid.value == 1.0 and valid.n == 4
    for r in rows:
        assert r.error is None and r.sample_id.endswith(("-ett-s0", "-ett-s1"))
        assert r.scores["valid"] == 1.0 and r.scores["bound_error"] < 1e-6
        lo, hi = r.prediction["lower"], r.prediction["upper"]
        assert lo - 1e-9 <= r.target["truth"] <= hi + 1e-9
        if r.sample_id.startswith("backdoor"):  # the PAG's visible X -> Y with unconfounded Y: identified
            assert r.scores["identified"] == 1.0 and hi - lo < 1e-6
        else:  # the bow's PAG is complete: Tian & Pearl's [p_1 - 1, p_1]
            assert hi - lo == pytest.approx(1.0, abs=LP_TOL)
