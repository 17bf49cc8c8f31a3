"""The one seeded bootstrap in harness.stats, and parity with the eight hand-written copies it replaced.

Each ``_old_*`` function below is the formula a family used before it called harness.stats, written
out as it was; every family's interval must come out the same, bit for bit, on generated inputs
(sizes, seeds and rounds varied, ties and degenerate resamples included).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

from harness.stats import (
    BOOTSTRAP_ROUNDS,
    bootstrap_ci,
    bootstrap_cis,
    mean_ci,
    normal_replicates,
    percentile_interval,
    resample_counts,
    resample_positions,
    unit_means,
)
from harness.task import SampleRecord

SEEDS = (0, 1, 7)


def _same(a: float | None, b: float | None) -> bool:
    """Equal as stored: the same float, or both absent/NaN."""
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b


# ---------------------------------------------------------------- the core API


def test_resamples_whole_units_and_keeps_each_stratum_within_itself():
    pos = resample_positions(10, rounds=50, seed=3, strata=[4, 6])
    assert pos.shape == (50, 10)
    assert (pos[:, :4] < 4).all() and (pos[:, 4:] >= 4).all()  # a block's resamples stay in the block
    # a unit of several columns is drawn whole: both coordinates of a resampled row come from one unit
    units = np.column_stack([np.arange(10), 100 + np.arange(10)])
    seen: list[np.ndarray] = []
    bootstrap_ci(units, lambda u: seen.append(u) or 0.0, rounds=5, value=0.0)
    assert all((u[:, 1] == u[:, 0] + 100).all() for u in seen) and len(seen) == 5


def test_counts_are_the_tally_of_the_same_draws():
    pos = resample_positions(7, rounds=30, seed=5)
    counts = resample_counts(7, rounds=30, seed=5)
    assert counts.dtype == np.float64 and (counts.sum(axis=1) == 7).all()
    assert all((np.bincount(p, minlength=7) == c).all() for p, c in zip(pos, counts, strict=True))
    # so a ratio of sums over counts equals the same ratio over the resampled units
    rows = np.random.default_rng(1).integers(1, 9, size=(7, 2)).astype(float)
    over_units = bootstrap_ci(rows, lambda r: r[..., 0].sum(-1) / r[..., 1].sum(-1), batched=True)
    over_counts = bootstrap_ci(7, lambda w: (w @ rows[:, 0]) / (w @ rows[:, 1]), batched=True, resample="counts")
    assert over_units.value == pytest.approx(over_counts.value)
    assert over_units.ci_low == pytest.approx(over_counts.ci_low) and over_units.ci_high == pytest.approx(
        over_counts.ci_high)


def test_per_round_and_batched_statistics_agree_and_point_is_row_zero():
    x = np.random.default_rng(2).normal(size=25)
    per_round = bootstrap_ci(x, lambda u: float(np.median(u)), seed=4, rounds=200)
    batched = bootstrap_ci(x, lambda u: np.median(u, axis=1), seed=4, rounds=200, batched=True)
    assert (per_round.value, per_round.ci_low, per_round.ci_high) == (batched.value, batched.ci_low, batched.ci_high)
    assert per_round.value == float(np.median(x)) and per_round.n == 25
    assert per_round.ci_low < per_round.value < per_round.ci_high
    # the seed decides the interval, a caller's generator replaces the seed
    assert bootstrap_ci(x, np.mean, seed=4) == bootstrap_ci(x, np.mean, seed=4) != bootstrap_ci(x, np.mean, seed=5)
    assert bootstrap_ci(x, np.mean, rng=np.random.default_rng(4)) == bootstrap_ci(x, np.mean, seed=4)


def test_several_statistics_share_the_same_resamples():
    x = np.random.default_rng(3).normal(size=15)
    both = bootstrap_cis(x, lambda u: {"mean": float(u.mean()), "twice": float(2 * u.mean())}, seed=1, rounds=100)
    assert both["twice"].ci_low == pytest.approx(2 * both["mean"].ci_low)
    assert both["twice"].ci_high == pytest.approx(2 * both["mean"].ci_high)


def test_undefined_resamples_are_left_out_and_undefined_points_have_no_interval():
    assert percentile_interval([1.0, math.nan, 2.0, math.inf, 3.0]) == tuple(np.quantile([1.0, 2.0, 3.0],
                                                                                          [0.025, 0.975]))
    assert all(math.isnan(v) for v in percentile_interval([math.nan, math.nan]))
    est = bootstrap_ci(np.arange(5.0), lambda u: math.nan)
    assert math.isnan(est.value) and math.isnan(est.ci_low) and math.isnan(est.ci_high)
    one = bootstrap_ci(np.array([4.0]), np.mean)  # one unit: every resample is that unit
    assert (one.value, one.ci_low, one.ci_high, one.n) == (4.0, 4.0, 4.0, 1)


def test_bad_arguments_are_one_precise_error():
    with pytest.raises(ValueError, match="no units"):
        bootstrap_ci(np.array([]), np.mean)
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        bootstrap_ci(np.arange(3.0), np.mean, rounds=0)
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_ci(np.arange(3.0), np.mean, alpha=1.5)
    with pytest.raises(ValueError, match="strata sizes"):
        resample_positions(5, strata=[2, 2])
    with pytest.raises(ValueError, match="needs the units themselves"):
        bootstrap_ci(5, np.mean)


def test_unit_means_average_epochs_within_a_unit_first():
    keys, rows = unit_means(["b", "a", "b", "a", "c"], [[1.0, 2.0], [0.0, 0.0], [3.0, 4.0], [1.0, 1.0], [5.0, 5.0]])
    assert keys == ["b", "a", "c"]  # first appearance: callers sort records first, as harness.aggregate does
    assert rows.tolist() == [[2.0, 3.0], [0.5, 0.5], [5.0, 5.0]]
    # three copies of a value whose mean is an ulp off: a unit of equal epochs keeps the value exactly
    v = 0.1
    assert np.mean([v, v, v]) != v and unit_means(["u"] * 3, [v, v, v])[1][0] == v
    with pytest.raises(ValueError, match="2 unit keys for 3 rows"):
        unit_means(["a", "b"], [1.0, 2.0, 3.0])


def test_normal_replicates_are_the_seeded_parametric_draws():
    draws = normal_replicates([1.0, 2.0], [0.0, 0.5], rounds=400, seed=2)
    assert draws.shape == (400, 2) and (draws[:, 0] == 1.0).all()
    assert draws[:, 1].std() == pytest.approx(0.5, rel=0.15)


# ---------------------------------------------------------------- parity: the mean (harness.stats.mean_ci)


def _old_mean_ci(values, seed=0, alpha=0.05):
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    mean = float(x.mean())
    if n == 1 or np.all(x == x[0]):
        return mean, mean, mean, n
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(BOOTSTRAP_ROUNDS, n))
    boots = x[idx].mean(axis=1)
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return mean, float(lo), float(hi), n


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", [1, 2, 9, 300])
def test_mean_ci_parity(seed, n):
    r = np.random.default_rng(100 + n)
    for x in (r.normal(size=n), (r.random(n) < 0.3).astype(float), np.full(n, 0.25)):
        est = mean_ci(x, seed=seed)
        assert (est.value, est.ci_low, est.ci_high, est.n) == _old_mean_ci(x, seed)
        for alpha in (0.0, 0.1):
            est = mean_ci(x, seed=seed, alpha=alpha)
            assert (est.value, est.ci_low, est.ci_high, est.n) == _old_mean_ci(x, seed, alpha=alpha)


# ---------------------------------------------------------------- parity: agents (Crafter score)


def _episodes(n, seed):
    from harness.tasks.agents.env import ACHIEVEMENTS

    r = np.random.default_rng(seed)
    return [{f"achievement_{a}": float(r.random() < 0.05 + 0.04 * i) for i, a in enumerate(ACHIEVEMENTS)}
            for _ in range(n)]


def _old_score_ci(episodes, seed=0, rounds=1000):
    from harness.tasks.agents.env import ACHIEVEMENTS

    n = len(episodes)
    if n < 2:
        return math.nan, math.nan
    mat = np.array([[1.0 if ep.get(f"achievement_{a}", 0.0) >= 1 else 0.0 for a in ACHIEVEMENTS] for ep in episodes])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(rounds, n))
    rates = 100.0 * mat[idx].mean(axis=1)
    scores = np.exp(np.log1p(rates).mean(axis=1)) - 1.0
    return float(np.quantile(scores, 0.025)), float(np.quantile(scores, 0.975))


@pytest.mark.parametrize(("n", "seed", "rounds"), [(1, 0, 1000), (2, 0, 1000), (12, 3, 1000), (40, 1, 250)])
def test_agents_score_ci_parity(n, seed, rounds):
    from harness.tasks.agents.metrics import score_ci

    eps = _episodes(n, n + seed)
    got, want = score_ci(eps, seed=seed, rounds=rounds), _old_score_ci(eps, seed, rounds)
    assert all(_same(a, b) for a, b in zip(got, want, strict=True))


# ---------------------------------------------------------------- parity: alignment (stratified by question)


def _old_stratified_rate(groups, seed=0, rounds=1000):
    arrays = [np.asarray(v, dtype=float) for _, v in sorted(groups.items()) if v]
    if not arrays:
        return float("nan"), float("nan"), float("nan"), 0
    value = float(np.mean([a.mean() for a in arrays]))
    rng = np.random.default_rng(seed)
    boots = np.zeros(rounds)
    for a in arrays:
        boots += a[rng.integers(0, a.size, size=(rounds, a.size))].mean(axis=1)
    boots /= len(arrays)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return value, float(lo), float(hi), int(sum(a.size for a in arrays))


@pytest.mark.parametrize("seed", SEEDS)
def test_alignment_stratified_rate_parity(seed):
    from harness.tasks.alignment.misalignment import stratified_rate

    r = np.random.default_rng(seed)
    cases = [{f"q{i}": [float(x) for x in r.random(int(r.integers(1, 25))) < r.random()] for i in range(8)},
             {"only": [1.0, 0.0, 0.0]}, {"a": [1.0], "b": [0.0, 1.0], "empty": []}, {"single": [1.0]}, {}]
    for groups in cases:
        for rounds in (1000, 137):
            got, want = stratified_rate(groups, seed, rounds), _old_stratified_rate(groups, seed, rounds)
            assert all(_same(a, b) for a, b in zip(got, want, strict=True)), groups


# ---------------------------------------------------------------- parity: dsgg (pooled sums over videos)


def _old_dsgg_bootstrap(stats, fn, seed=0):
    n = next(iter(stats.values())).shape[0]
    value = fn({k: a.sum(0) for k, a in stats.items()})
    if n < 2:
        return {k: (v, v, v) for k, v in value.items()}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(BOOTSTRAP_ROUNDS, n))
    w = np.zeros((BOOTSTRAP_ROUNDS, n))
    np.add.at(w, (np.repeat(np.arange(BOOTSTRAP_ROUNDS), n), idx.ravel()), 1.0)
    sums = {k: (w @ a.reshape(n, -1)).reshape((BOOTSTRAP_ROUNDS, *a.shape[1:])) for k, a in stats.items()}
    boots = defaultdict(list)
    for b in range(BOOTSTRAP_ROUNDS):
        for k, v in fn({name: s[b] for name, s in sums.items()}).items():
            boots[k].append(v)
    out = {}
    for k, v in value.items():
        arr = np.asarray(boots[k], dtype=float)
        arr = arr[np.isfinite(arr)]
        lo, hi = (np.quantile(arr, [0.025, 0.975]) if arr.size else (np.nan, np.nan))
        out[k] = (v, float(lo), float(hi))
    return out


def _vidvrd_fn(s):
    return {"R@50": float(s["hits"][0] / s["gt"]) if s["gt"] else 0.0,
            "R@100": float(s["hits"][1] / s["gt"]) if s["gt"] else 0.0,
            "mR": float(np.mean(s["per"] / (s["cnt"] + 1e-10))),
            "undefined_sometimes": float(s["hits"][0] / s["rare"]) if s["rare"] else math.nan}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", [1, 2, 11, 40])
def test_dsgg_bootstrap_parity(seed, n):
    from harness.tasks.dsgg.aggregate import _bootstrap, _set_fn
    from harness.tasks.dsgg.set_metrics import SetCounts

    r = np.random.default_rng(seed * 100 + n)
    stats = {"hits": r.integers(0, 10, size=(n, 2)).astype(float), "gt": r.integers(5, 12, size=n).astype(float),
             "per": r.random((n, 6)) * 3, "cnt": r.integers(0, 4, size=(n, 6)).astype(float),
             "rare": (r.random(n) < 0.2).astype(float)}
    got, want = _bootstrap(stats, _vidvrd_fn, seed), _old_dsgg_bootstrap(stats, _vidvrd_fn, seed)
    assert got.keys() == want.keys()
    for k in want:
        assert all(_same(a, b) for a, b in zip(got[k], want[k], strict=True)), k
    fields = list(SetCounts.__dataclass_fields__)
    counts = {"c": r.integers(0, 20, size=(n, len(fields))).astype(float)}
    assert _bootstrap(counts, _set_fn(""), seed) == _old_dsgg_bootstrap(counts, _set_fn(""), seed)


# ---------------------------------------------------------------- parity: methods (ARI / NMI over points)


def _points(n, seed):
    r = np.random.default_rng(seed)
    lab = r.integers(0, 3, n)
    pred = np.where(r.random(n) < 0.7, lab, r.integers(0, 3, n))
    return [SampleRecord(f"s{i:03d}", 0, {}, None, None, {}, 0.0, {"cluster": int(pred[i]), "label": int(lab[i])})
            for i in range(n)]


def _old_cluster_intervals(records, seed=0):
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    from harness.tasks.methods.clustering import BOOTSTRAP

    ok = sorted(records, key=lambda r: (r.sample_id, r.epoch))
    pred = np.array([r.details["cluster"] for r in ok])
    true = np.array([r.details["label"] for r in ok])
    n = len(ok)
    rng = np.random.default_rng(seed)
    boots = rng.integers(0, n, size=(BOOTSTRAP, n))
    out = {}
    for name, fn in (("ari", adjusted_rand_score), ("nmi", normalized_mutual_info_score)):
        value = float(fn(true, pred))
        samples = [float(fn(true[b], pred[b])) for b in boots]
        lo, hi = np.quantile(samples, [0.025, 0.975])
        out[name] = (value, float(lo), float(hi), n)
    return out


@pytest.mark.parametrize(("n", "seed"), [(1, 0), (30, 0), (45, 7)])
def test_methods_cluster_metrics_parity(n, seed):
    from harness.tasks.methods.clustering import cluster_metrics

    recs = _points(n, n + seed)
    got = {m.name: (m.value, m.ci_low, m.ci_high, m.n) for m in cluster_metrics(recs, seed=seed)
           if m.name in ("ari", "nmi")}
    assert got == _old_cluster_intervals(recs, seed)


# ---------------------------------------------------------------- parity: reid (one epoch: nothing changes)


def _reid_records(seed, n_query=12, n_gallery=20, dim=4):
    r = np.random.default_rng(seed)
    recs = [SampleRecord(f"q{i:02d}", 0, {}, None, None, {"role": "query", "pid": i % 5, "camid": 0}, 0.0,
                         {"embedding": [float(v) for v in r.normal(size=dim)]}) for i in range(n_query)]
    recs += [SampleRecord(f"g{i:02d}", 0, {}, None, None, {"role": "gallery", "pid": i % 5, "camid": 1}, 0.0,
                          {"embedding": [float(v) for v in r.normal(size=dim)]}) for i in range(n_gallery)]
    return recs


def _old_reid_intervals(records, distance, seed):
    from harness.tasks.reid.metrics import cosine_distances, euclidean_distances, evaluate
    from harness.tasks.reid.task import BOOTSTRAP

    usable = sorted(records, key=lambda r: (r.sample_id, r.epoch))
    q = [r for r in usable if r.metadata["role"] == "query"]
    g = [r for r in usable if r.metadata["role"] == "gallery"]
    qf = np.asarray([r.details["embedding"] for r in q])
    gf = np.asarray([r.details["embedding"] for r in g])
    dist = euclidean_distances(qf, gf) if distance == "euclidean" else cosine_distances(qf, gf)
    res = evaluate(dist, np.asarray([r.metadata["pid"] for r in q]), np.asarray([r.metadata["pid"] for r in g]),
                   np.asarray([r.metadata["camid"] for r in q]), np.asarray([r.metadata["camid"] for r in g]),
                   max_rank=10)

    def _bootstrap(per_query, rng):
        n = len(per_query)
        idx = rng.integers(0, n, size=(BOOTSTRAP, n))
        lo, hi = np.quantile(per_query[idx].mean(axis=1), [0.025, 0.975])
        return float(lo), float(hi)

    rng = np.random.default_rng(seed)
    out = {}
    for name, per_query, value in (("mAP", res.ap, res.mAP), ("mINP", res.inp, res.mINP)):
        out[name] = (value, *_bootstrap(per_query, rng), res.n_valid)
    for k in (1, 5, 10):
        hits = (res.first < k).astype(np.float64)
        out[f"rank{k}"] = (res.rank(k), *_bootstrap(hits, rng), res.n_valid)
    return out


@pytest.mark.parametrize(("seed", "distance"), [(0, "euclidean"), (1, "cosine"), (5, "euclidean")])
def test_reid_intervals_parity_with_one_epoch(seed, distance):
    from harness.tasks.reid.task import reid_metrics

    recs = _reid_records(seed)
    got = {m.name: (m.value, m.ci_low, m.ci_high, m.n) for m in reid_metrics(recs, distance, seed)
           if m.name in ("mAP", "mINP", "rank1", "rank5", "rank10")}
    assert got == _old_reid_intervals(recs, distance, seed)


# ---------------------------------------------------------------- parity: spa3d (AUROC, correlations)


def _old_auroc_interval(pos, neg):
    from harness.tasks.spa3d.task import auroc

    rng = np.random.default_rng(0)
    draws = rng.integers(0, len(pos), (1000, len(pos)))
    boots = [auroc([pos[j] for j in b], [neg[j] for j in b]) for b in draws]
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return auroc(pos, neg), float(lo), float(hi), len(pos)


@pytest.mark.parametrize("n", [1, 6, 25])
def test_spa3d_auroc_parity(n):
    from harness.tasks.spa3d.task import pairs_aggregate

    class _Task:  # default_aggregate reads the breakdowns only
        breakdowns = ()

    r = np.random.default_rng(n)
    pos, neg = [float(v) for v in r.normal(0.5, size=n)], [float(v) for v in r.normal(size=n)]
    neg[0] = pos[0]  # a tie counts half
    recs = [SampleRecord(f"p{i:03d}", 0, {"realism_realistic": pos[i], "realism_violated": neg[i]}, None, None, {})
            for i in range(n)]
    got = [(m.value, m.ci_low, m.ci_high, m.n) for m in pairs_aggregate([_Task()])(recs) if m.name == "auroc"]
    assert got == [_old_auroc_interval(pos, neg)]


def _old_correlations(x, y, seed=0, rounds=1000):
    from scipy import stats

    xa, ya = np.asarray(x, float), np.asarray(y, float)
    out = []
    for name, fn in (("spearman", stats.spearmanr), ("pearson", stats.pearsonr)):
        if len(xa) < 3 or np.all(xa == xa[0]) or np.all(ya == ya[0]):
            continue
        value = float(fn(xa, ya)[0])
        rng = np.random.default_rng(seed)
        boots = []
        for idx in rng.integers(0, len(xa), (rounds, len(xa))):
            if np.all(xa[idx] == xa[idx][0]) or np.all(ya[idx] == ya[idx][0]):
                continue
            boots.append(float(fn(xa[idx], ya[idx])[0]))
        lo, hi = np.quantile(boots, [0.025, 0.975]) if boots else (None, None)
        out.append((name, value, None if lo is None else float(lo), None if hi is None else float(hi), len(xa)))
    return out


@pytest.mark.parametrize(("n", "seed", "rounds"), [(3, 0, 1000), (5, 2, 1000), (20, 1, 300)])
def test_spa3d_correlation_parity(n, seed, rounds):
    from harness.tasks.spa3d.task import correlation_metrics

    r = np.random.default_rng(n * 10 + seed)
    x = [float(v) for v in r.normal(size=n)]
    y = [xi + float(e) for xi, e in zip(x, r.normal(size=n), strict=True)]
    ties_x = [0.0] * (n - 1) + [1.0]  # most resamples constant: left out, as before
    for xs, ys in ((x, y), (ties_x, y)):
        got = [(m.name, m.value, m.ci_low, m.ci_high, m.n) for m in correlation_metrics(xs, ys, seed, rounds)]
        assert got == _old_correlations(xs, ys, seed, rounds)


# ---------------------------------------------------------------- parity: longshot (multinomial counts)


def _longshot_records(n, seed):
    from harness.tasks.longshot.items import DURATION_BINS, TASK_CATEGORIES

    tasks = [t for ts in TASK_CATEGORIES.values() for t in ts][:5]
    r = np.random.default_rng(seed)
    recs = []
    for i in range(n):
        meta = {"sample_id": f"it{i:03d}", "canonical_task": tasks[int(r.integers(0, len(tasks)))],
                "modality": ["visual", "audio", "speech"][:int(r.integers(1, 4))],
                "duration_bin": DURATION_BINS[int(r.integers(0, len(DURATION_BINS)))][0]}
        for turn in range(int(r.integers(1, 3))):
            possible = float(r.integers(0, 5))
            for epoch in range(2):
                earned = float(min(possible, r.integers(0, 5)))
                recs.append(SampleRecord(f"it{i:03d}#{turn}", epoch, {"possible": possible, "earned": earned,
                                                                      "score": earned / possible if possible else 0.0},
                                         None, None, meta))
    return recs


def _old_longshot_micro(items, seed, rounds):
    """The released micro accuracy's interval as the old code drew it: row 0 observed, rows 1..
    multinomial counts of items from default_rng(seed); NaN rows (absent) left out."""
    n = len(items)
    rng = np.random.default_rng(seed)
    weights = np.vstack([np.ones(n), rng.multinomial(n, np.full(n, 1.0 / n), size=rounds)])
    earned = np.array([i.earned for i in items])
    possible = np.array([i.possible for i in items])
    acc = {}
    for name, mask in [("", np.ones(n, bool)), *[(t, np.array([i.task == t for i in items]))
                                                 for t in sorted({i.task for i in items})]]:
        w = weights[:, mask]
        with np.errstate(all="ignore"):
            a = np.where(w @ possible[mask] > 0, 100.0 * (w @ earned[mask]) / np.where(
                w @ possible[mask] > 0, w @ possible[mask], 1.0), 0.0)
        a = np.where(w.sum(axis=1) > 0, a, np.nan)
        b = a[1:][~np.isnan(a[1:])]
        lo, hi = np.quantile(b, [0.025, 0.975]) if b.size else (None, None)
        acc[name] = (float(a[0]), None if lo is None else float(lo), None if hi is None else float(hi))
    return acc


@pytest.mark.parametrize(("n", "seed", "rounds"), [(1, 0, 1000), (15, 0, 1000), (40, 3, 200)])
def test_longshot_parity(n, seed, rounds):
    from harness.tasks.longshot.scoring import aggregate, item_totals

    recs = _longshot_records(n, n + seed)
    want = _old_longshot_micro(item_totals(recs), seed, rounds)
    ms = aggregate(recs, seed=seed, rounds=rounds)
    got = {"": next((m.value, m.ci_low, m.ci_high) for m in ms if m.name == "micro_accuracy")}
    got |= {m.breakdown_value: (m.value, m.ci_low, m.ci_high) for m in ms
            if m.name == "accuracy" and m.breakdown_key == "task"}
    assert got == want


# ---------------------------------------------------------------- parity: leaderboard mean win rate


def _old_mean_win_rates(cells, directions, rounds=1000, seed=0):
    from harness.leaderboard.winrate import _finite, _rates, _se

    models = sorted(cells)
    index = {m: i for i, m in enumerate(models)}
    sums = np.zeros((rounds + 1, len(models)))
    n_tasks = np.zeros(len(models), dtype=int)
    rng = np.random.default_rng(seed)
    for task in sorted(directions):
        direction = directions[task]
        if direction not in ("higher", "lower"):
            continue
        present = [m for m in models if task in cells[m] and _finite(cells[m][task].value)]
        if len(present) < 2:
            continue
        value = np.array([cells[m][task].value for m in present], dtype=float)
        se = np.array([_se(cells[m][task]) for m in present])
        draws = value + se * rng.standard_normal((rounds, len(present)))
        rates = _rates(np.vstack([value[None, :], draws]), 1.0 if direction == "higher" else -1.0)
        cols = [index[m] for m in present]
        sums[:, cols] += rates
        n_tasks[cols] += 1
    out = {}
    for m in models:
        k = int(n_tasks[index[m]])
        if k == 0:
            out[m] = (None, None, None)
            continue
        means = sums[:, index[m]] / k
        lo, hi = np.quantile(means[1:], [0.025, 0.975]) if rounds else (means[0], means[0])
        out[m] = (float(means[0]), float(min(lo, means[0])), float(max(hi, means[0])))
    return out


@pytest.mark.parametrize(("seed", "rounds"), [(0, 1000), (4, 300), (0, 0)])
def test_leaderboard_win_rate_parity(seed, rounds):
    from harness.leaderboard.ranking import Scored
    from harness.leaderboard.winrate import mean_win_rates

    r = np.random.default_rng(seed + 10)
    cells = {}
    for m in range(6):
        cells[m] = {}
        for t in "abcd":
            if r.random() < 0.8:
                v, h = float(r.random()), float(r.random() * 0.2)
                cells[m][t] = Scored(v, v - h, v + h) if r.random() < 0.8 else Scored(v, None, None)
    directions = {"a": "higher", "b": "lower", "c": None, "d": "higher"}
    got = {m: (w.value, w.ci_low, w.ci_high) for m, w in mean_win_rates(cells, directions, rounds=rounds,
                                                                        seed=seed).items()}
    assert got == _old_mean_win_rates(cells, directions, rounds, seed)
