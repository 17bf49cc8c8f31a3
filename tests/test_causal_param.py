"""The P-NCM over a parameterised PAG class (``pncm -M class=param``): the space of edge types reaches
exactly the enumerated class, the batched forward pass is the NCM read as an SCM, the bounds contain
the truth next to the sharp LP and the enumeration, and bad settings are one-line errors."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import asyncio  # noqa: E402
import itertools  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from harness.modelspec import build_model  # noqa: E402
from harness.runner import EvalConfig, Runner  # noqa: E402
from harness.store.db import open_db  # noqa: E402
from harness.tasks.causal.counterfactual import exact_table, value  # noqa: E402
from harness.tasks.causal.graphs import GRAPHS, Diagram, check_pag, diagrams_of_pag, maximal, pag_of, parse_pag  # noqa: E402
from harness.tasks.causal.lp import class_bounds  # noqa: E402
from harness.tasks.causal.ncm import NCMConfig, ncm_bounds  # noqa: E402
from harness.tasks.causal.pag_space import TYPES, structure_space  # noqa: E402
from harness.tasks.causal.problem import Problem  # noqa: E402
from harness.tasks.causal.scm import configs, random_scm  # noqa: E402
from harness.types import Message, Part, Request  # noqa: E402


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_the_edge_type_space_reaches_exactly_the_enumerated_class(graph: str) -> None:
    """Every member (maximal ones included) is the diagram of one choice of allowed types, and the
    choices that pass the membership test are exactly the enumerated class: nothing outside it."""
    pag = pag_of(GRAPHS[graph])
    space = structure_space(pag)
    members = set(diagrams_of_pag(pag))
    passed = {space.diagram(ch) for ch in itertools.product(*space.allowed) if space.is_member(ch)}
    assert passed == members
    for m in maximal(tuple(members)):
        ch = space.choice_of(m)
        assert ch is not None and space.is_member(ch) and space.diagram(ch) == m
    if graph == "iv":  # Z -> X -> Y -> Z: a cycle, refused
        assert not space.is_member((TYPES.index("->"), TYPES.index("<-"), TYPES.index("->")))


def test_invariant_marks_restrict_the_types_locally() -> None:
    space = structure_space(pag_of(GRAPHS["backdoor"]))  # W o-> X; Z o-> X; Z --> Y; X --> Y
    allowed = {pair: {TYPES[t] for t in ok} for pair, ok in zip(space.pairs, space.allowed, strict=True)}
    assert allowed[("X", "Y")] == {"->"}  # visible (W *-> X, W not adjacent to Y): no confounding
    assert allowed[("Z", "Y")] == {"->", "<->", "->+"}  # invisible: Z may be confounded with Y
    assert allowed[("W", "X")] == {"->", "<->", "->+"}  # an arrowhead at X: X is no ancestor of W
    with pytest.raises(ValueError, match="no causal diagram") as info:
        structure_space(parse_pag("A --- B; B o-> C"))  # an undirected edge: selection bias
    assert "\n" not in str(info.value)


def _joint(d: Diagram, mixture: list[tuple[float, dict[str, Any]]]) -> Any:
    V = configs(len(d.names))
    out = np.zeros(len(V))
    for w, probs in mixture:
        p = np.full(len(V), w)
        for j, v in enumerate(d.names):
            pa = [d.names.index(a) for a in d.parents(v)]
            idx = tuple(V[:, i] for i in pa)
            p1 = np.asarray(probs[v])[idx] if pa else np.full(len(V), float(probs[v]))
            p *= np.where(V[:, j] == 1, p1, 1 - p1)
        out += p
    return out


@pytest.mark.parametrize("graph", ["iv", "bow"])
def test_the_batched_forward_is_the_ncm_read_as_an_scm(graph: str) -> None:
    """For several class members, the likelihood, the ATE and counterfactual queries the training
    optimises equal the exact evaluation of the same NCM read as an SCM (counterfactual.exact_table)."""
    import torch

    from harness.tasks.causal.pncm_param import _Objective, _ParamNCM

    pag = pag_of(GRAPHS[graph])
    space = structure_space(pag)
    model = _ParamNCM(space, NCMConfig(latent_points=4, width=8, atom_scale=4.0, seed=3), 2)
    with torch.no_grad():
        model.atom_logits.copy_(torch.randn(model.atom_logits.shape, generator=torch.Generator().manual_seed(0)))
    p = random_scm(GRAPHS[graph], 0).joint()
    members = maximal(check_pag(pag))
    small = min(diagrams_of_pag(pag), key=lambda d: len(d.bidirected))  # fewer c-components
    for d in (members[0], members[-1], small):
        ch = space.choice_of(d)
        assert ch is not None
        q = torch.nn.functional.one_hot(torch.as_tensor([ch, ch]), len(TYPES)).float()
        for query in ("ate", "pns", "ett"):
            with torch.no_grad():
                kl, val = _Objective(model, p, query, "X", "Y")(q, [ch, ch], torch.arange(2))
            for r in range(2):
                mix = model.mixture(r, ch)
                joint = _joint(d, mix)
                assert joint.sum() == pytest.approx(1.0, abs=1e-6)
                assert float(kl[r]) == pytest.approx(float((p * np.log(p / joint)).sum()), abs=2e-5)
                assert float(val[r]) == pytest.approx(value(query, exact_table(d, mix)), abs=2e-5)


def _request(graph: str, seed: int, query: str = "ate") -> tuple[Request, float]:
    d = GRAPHS[graph]
    scm = random_scm(d, seed)
    prob = Problem(d.names, scm.joint().tolist(), 0, str(pag_of(d)), str(d), query)
    return Request([Message("user", [Part("text", "bound it", options=prob.to_options())])]), scm.query(query)


def test_param_bounds_on_the_bow_meet_the_sharp_lp_and_the_enumeration() -> None:
    """One NCM per sense over the bow's class: the truth inside, no end beyond the sharp LP bounds
    (nothing outside the class), both ends within 0.05 of them and of the enumeration's, and the ends
    come from members of the class."""
    from harness.tasks.causal.graphs import parse_diagram

    d = GRAPHS["bow"]
    req, truth = _request("bow", 0)
    (out,) = asyncio.run(build_model("pncm", {"iters": 1000, "restarts": 1, "class": "param"}).generate([req]))
    assert out.error is None, out.error
    pred = out.prediction
    assert pred["class"] == "param" and pred["nonmember_modes"] == 0
    members = set(diagrams_of_pag(pag_of(d)))
    assert parse_diagram(pred["lower_structure"], d.names) in members
    assert parse_diagram(pred["upper_structure"], d.names) in members
    p = random_scm(d, 0).joint()
    maximal_members = maximal(check_pag(pag_of(d)))
    sharp, _ = class_bounds(maximal_members, p, "ate")
    assert pred["lower"] - 1e-3 <= truth <= pred["upper"] + 1e-3
    assert sharp.lower - 0.01 <= pred["lower"] and pred["upper"] <= sharp.upper + 0.01
    assert abs(pred["lower"] - sharp.lower) < 0.05 and abs(pred["upper"] - sharp.upper) < 0.05
    enum = ncm_bounds(maximal_members, p, "ate", NCMConfig(iters=1000, restarts=1))
    assert abs(pred["lower"] - enum.lower) < 0.05 and abs(pred["upper"] - enum.upper) < 0.05


def test_pncm_class_param_through_the_runner_identifies_the_backdoor_effect(sqlite_url: str) -> None:
    """The backdoor PAG identifies the ATE (X --> Y is visible): the learned structures must keep
    the class's confounding off X -> Y, and the bounds collapse onto the truth."""
    from harness.store import ops

    sessions = open_db(sqlite_url)
    summary = Runner(EvalConfig(task="causal_bounds", model="pncm", task_options={"graph": "backdoor", "seeds": 1},
                                model_settings={"class": "param", "restarts": 1, "latent_points": 16, "width": 8},
                                progress=False), session_factory=sessions).run()
    m = {x.name: x.value for x in summary.metrics if not x.breakdown_key}
    assert summary.n_new == 1 and summary.n_errors == 0
    assert m["valid"] == 1.0 and m["identified"] == 1.0 and m["bound_error"] < 0.03
    with sessions() as s:
        (rec,) = ops.load_records(s, summary.run_id)
    assert rec.details["nonmember_modes"] == 0


@pytest.mark.parametrize("settings, msg", [({"class": "tree"}, "class"), ({"struct_lr": 0}, "struct_lr"),
                                           ({"struct_share": 1.5}, "struct_share"), ({"clas": "param"}, "class"),
                                           ({"struct_grad": "reinforce"}, "struct_grad")])
def test_bad_param_settings_are_one_line_errors(settings: dict[str, Any], msg: str) -> None:
    with pytest.raises(ValueError, match=msg) as info:
        build_model("pncm", settings)
    assert "\n" not in str(info.value)


def test_a_string_no_diagram_has_is_a_one_line_error_row_for_class_param() -> None:
    d = GRAPHS["bow"]
    prob = Problem(d.names, random_scm(d, 0).joint().tolist(), 0, "X --> Y; Y --> Z; Z --> X", str(d), "ate")
    req = Request([Message("user", [Part("text", "bound it", options=prob.to_options())])])
    (out,) = asyncio.run(build_model("pncm", {"class": "param", "iters": 5}).generate([req]))
    assert out.error and "not a PAG" in out.error and "\n" not in out.error
