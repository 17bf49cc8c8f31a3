"""Causal bounds: PAGs from causal-learn, the class a PAG stands for, the sharp response-function LP,
NCM bounds against it, and the causal_bounds task through the runner with P-NCM."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import asyncio  # noqa: E402

import pytest  # noqa: E402

from harness.modelspec import build_model  # noqa: E402
from harness.runner import EvalConfig, Runner  # noqa: E402
from harness.store.db import open_db  # noqa: E402
from harness.tasks.causal.graphs import GRAPHS, check_pag, diagrams_of_pag, maximal, pag_of, parse_pag  # noqa: E402
from harness.tasks.causal.lp import class_bounds, lp_bounds  # noqa: E402
from harness.tasks.causal.ncm import NCMConfig, fit_bounds  # noqa: E402
from harness.tasks.causal.problem import Problem  # noqa: E402
from harness.tasks.causal.scm import configs, manski, random_scm  # noqa: E402
from harness.tasks.causal.tasks import make_task  # noqa: E402
from harness.types import Message, Part, Request  # noqa: E402

FAST = NCMConfig(iters=1000, restarts=1)  # fewer iterations stop short of the bounds


def test_pag_of_backdoor_graph_orients_the_visible_edge_and_its_class_holds_the_truth():
    d = GRAPHS["backdoor"]
    pag = pag_of(d)
    assert pag == parse_pag("W o-> X; Z o-> X; Z --> Y; X --> Y", d.names)
    members = diagrams_of_pag(pag)
    assert d in members and all(pag_of(m) == pag for m in members)
    assert all(any(big.contains(m) for big in maximal(members)) for m in members)
    # three confounded nodes with no independence: the PAG is complete, every mark a circle
    assert str(pag_of(GRAPHS["iv"])) == "Z o-o X; Z o-o Y; X o-o Y"


def test_bad_pag_strings_are_one_line_errors():
    for text, msg in [("X -> Y", "not a PAG edge"), ("X o-> X", "self-loop"), ("", "no edges"),
                      ("X --> Y; Y --> Z; Z --> X", "no causal diagram")]:
        with pytest.raises(ValueError, match=msg) as info:
            check_pag(parse_pag(text, ("X", "Y", "Z")))
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="not a PAG"):
        make_task(graph="bow", pag="X --> Y; Y --> Z; Z --> X")


def _front_door(p, names):
    """sum_m P(m|x) sum_x' P(y|m,x') P(x'), literal."""
    V = configs(len(names))
    xi, mi, yi = names.index("X"), names.index("M"), names.index("Y")

    def P(**fix):
        mask = np.ones(len(V), bool)
        for k, v in fix.items():
            mask &= V[:, {"x": xi, "m": mi, "y": yi}[k]] == v
        return float(p[mask].sum())

    def p_y_do(x):
        return sum(P(m=m, x=x) / P(x=x) * sum(P(y=1, m=m, x=x2) / P(m=m, x=x2) * P(x=x2) for x2 in (0, 1))
                   for m in (0, 1))

    return p_y_do(1) - p_y_do(0)


import numpy as np  # noqa: E402


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_lp_bounds_contain_the_truth_and_nest_known_in_pag_in_manski(graph):
    d = GRAPHS[graph]
    members = maximal(check_pag(pag_of(d)))
    for seed in range(2):
        scm = random_scm(d, seed)
        p = scm.joint()
        for query in ("ate", "pyx"):
            truth = scm.query(query)
            known = lp_bounds(d, p, query)
            pag, _ = class_bounds(members, p, query)
            lo, hi = manski(p, d.names, query)
            assert known.violation < 1e-7
            assert known.lower - 1e-6 <= truth <= known.upper + 1e-6
            assert pag.lower - 1e-6 <= known.lower and known.upper <= pag.upper + 1e-6
            assert lo - 1e-6 <= pag.lower and pag.upper <= hi + 1e-6


def test_lp_identifies_front_door_with_the_graph_and_gives_manski_under_its_complete_pag():
    d = GRAPHS["frontdoor"]
    scm = random_scm(d, 4)
    p = scm.joint()
    known = lp_bounds(d, p, "ate")
    assert known.lower == pytest.approx(known.upper, abs=1e-7)
    assert known.lower == pytest.approx(_front_door(p, d.names), abs=1e-7)
    assert known.lower == pytest.approx(scm.query("ate"), abs=1e-7)
    pag, _ = class_bounds(maximal(check_pag(pag_of(d))), p, "ate")
    assert (pag.lower, pag.upper) == pytest.approx(manski(p, d.names, "ate"), abs=1e-7)


def test_ncm_bounds_match_the_lp_on_a_bow_and_collapse_on_the_front_door():
    bow = GRAPHS["bow"]
    p = random_scm(bow, 0).joint()
    lp = lp_bounds(bow, p, "ate")
    lo, hi = fit_bounds(bow, p, "ate", FAST)
    assert lo[0].kl < 5e-4 and hi[0].kl < 5e-4
    assert abs(lo[0].value - lp.lower) < 0.03 and abs(hi[0].value - lp.upper) < 0.03
    fd = GRAPHS["frontdoor"]
    scm = random_scm(fd, 0)
    lo, hi = fit_bounds(fd, scm.joint(), "ate", NCMConfig(iters=400, restarts=1))  # identified: no push needed
    assert hi[0].value - lo[0].value <= 0.05
    assert lo[0].value - 0.02 <= scm.query("ate") <= hi[0].value + 0.02


def test_pncm_through_the_runner_identifies_the_backdoor_effect(sqlite_url):
    sessions = open_db(sqlite_url)
    summary = Runner(EvalConfig(task="causal_bounds", model="pncm", task_options={"graph": "backdoor", "seeds": 1},
                                model_settings={"restarts": 1, "latent_points": 16, "width": 8}, progress=False),
                     session_factory=sessions).run()
    m = {x.name: x.value for x in summary.metrics if not x.breakdown_key}
    assert summary.n_new == 1 and summary.n_errors == 0
    assert m["valid"] == 1.0 and m["identified"] == 1.0 and m["width"] <= 0.05
    assert m["bound_error"] < 0.03


def test_a_request_with_a_non_pag_string_is_a_per_sample_error_and_settings_are_checked():
    d = GRAPHS["bow"]
    prob = Problem(d.names, random_scm(d, 0).joint().tolist(), 0, "X --> Y; Y --> Z; Z --> X", str(d), "ate")
    req = Request([Message("user", [Part("text", "bound it", options=prob.to_options())])])
    (out,) = asyncio.run(build_model("bounds:lp").generate([req]))
    assert out.error and "not a PAG" in out.error and "\n" not in out.error
    (ok,) = asyncio.run(build_model("bounds:lp", {"information": "known_graph"}).generate([req]))
    assert ok.error is None and ok.prediction["information"] == "known_graph"
    with pytest.raises(ValueError, match="did you mean 'iters'"):
        build_model("pncm", {"iter": 10})
    with pytest.raises(ValueError, match="known_graph"):
        build_model("ncm:pag")
