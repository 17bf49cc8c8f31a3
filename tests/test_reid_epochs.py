"""ReID scores each query and gallery image once, whatever ``--epochs`` is.

The reported case: one query, a gallery image of the wrong identity at distance 1 and one of the
right identity at distance 4. The right match ranks second, so AP = 1/2. When every (image, epoch)
record was its own query and gallery image, ``--epochs 2`` put two copies of each gallery image in
the ranking (wrong, wrong, right, right: AP = (1/3 + 2/4) / 2 = 5/12 = 0.4167) and counted the
query twice.
"""

from __future__ import annotations

import pytest

from harness.task import SampleRecord
from harness.tasks.reid.task import reid_metrics


def _rec(sid, epoch, role, pid, cam, emb, error=None):
    details = {} if emb is None else {"embedding": emb}
    return SampleRecord(sid, epoch, {}, None, error, {"role": role, "pid": pid, "camid": cam}, 0.0, details)


def _issue_records(epochs):
    out = []
    for e in range(epochs):
        out += [_rec("q", e, "query", 1, 0, [0.0]),
                _rec("g-wrong", e, "gallery", 2, 1, [1.0]),  # distance 1
                _rec("g-right", e, "gallery", 1, 1, [4.0])]  # distance 4
    return out


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_cosine_ranks_the_same_case_alike(distance):
    # in 2-d: the wrong identity 10 degrees off the query's direction, the right one 60 degrees off
    import math

    vec = lambda deg: [math.cos(math.radians(deg)), math.sin(math.radians(deg))]  # noqa: E731
    recs = [r for e in range(2) for r in (_rec("q", e, "query", 1, 0, vec(0)),
                                          _rec("g-wrong", e, "gallery", 2, 1, vec(10)),
                                          _rec("g-right", e, "gallery", 1, 1, vec(60)))]
    assert {x.name: x.value for x in reid_metrics(recs, distance)}["mAP"] == 0.5


@pytest.mark.parametrize("epochs", [1, 2, 3])
def test_reference_map_is_the_same_with_any_number_of_epochs(epochs):
    m = {x.name: x for x in reid_metrics(_issue_records(epochs))}
    assert m["mAP"].value == 0.5 and m["mAP"].n == 1  # was 0.41666... with 2 epochs
    assert m["rank1"].value == 0.0 and m["rank5"].value == 1.0 and m["mINP"].value == 0.5
    assert m["valid_queries"].value == 1 and m["valid_queries"].n == 1
    assert m["unscored_queries"].n == 1 and m["unscored_gallery"].n == 2  # images, not records


def test_records_in_any_order_give_the_same_rows():
    recs = _issue_records(2)
    rows = lambda rs: [(x.name, x.value, x.ci_low, x.ci_high, x.n) for x in reid_metrics(rs)]  # noqa: E731
    assert rows(recs) == rows(list(reversed(recs))) == rows(_issue_records(1))


def test_epochs_of_a_stochastic_backend_are_averaged_per_image():
    # the right match's two epochs embed at 3.5 and 0.5: their mean (2.0) is closer than the wrong one
    # (2.5), so AP 1; epoch 0 alone would give 0.5, and four gallery copies ranked apart gave 0.75
    recs = [_rec("q", 0, "query", 1, 0, [0.0]), _rec("q", 1, "query", 1, 0, [0.0]),
            _rec("g-wrong", 0, "gallery", 2, 1, [2.5]), _rec("g-wrong", 1, "gallery", 2, 1, [2.5]),
            _rec("g-right", 0, "gallery", 1, 1, [3.5]), _rec("g-right", 1, "gallery", 1, 1, [0.5])]
    m = {x.name: x.value for x in reid_metrics(recs)}
    assert m["mAP"] == 1.0 and m["rank1"] == 1.0 and m["valid_queries"] == 1


def test_an_image_is_unscored_only_when_no_epoch_embedded_it():
    recs = _issue_records(2)
    recs[3] = _rec("q", 1, "query", 1, 0, None, error="timeout")  # epoch 1 of the query failed: epoch 0 counts
    recs += [_rec("q-lost", e, "query", 1, 0, None, error="timeout") for e in range(2)]
    m = {x.name: x for x in reid_metrics(recs)}
    assert m["unscored_queries"].value == 1 and m["unscored_queries"].n == 2
    assert m["mAP"].value == 0.5 and m["valid_queries"].value == 1
