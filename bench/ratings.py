"""Arena rating speed and vote intake.

1. Ratings: 50 models, 1,000,000 synthetic votes (about 25% ties). Ours: count the votes into the
   win matrix, Newton fit, 100 multinomial-bootstrap rounds (batched Newton), sandwich SEs. Baseline,
   in the same run: FastChat's earlier method (elo_analysis.compute_mle_elo before PR #3523, as we
   reconstruct it): per round, resample the vote table with replacement, pivot it into pair counts
   (wins x2 each way, ties once each way) and fit sklearn LogisticRegression(fit_intercept=False,
   no penalty) on one row per ordered pair with the counts as sample weights. Prints the ratio.
2. Vote intake: uvicorn (one process, this machine) on a SQLite file; C concurrent clients each fetch
   battles then post all their votes; votes/s over the posting phase, and lost votes
   (= successful answers minus rows stored, must be 0).

    python bench/ratings.py [--votes 1000000] [--models 50] [--rounds 100] [--baseline-rounds 100]
                            [--intake-votes 2000] [--clients 16]

``--baseline-rounds`` below ``--rounds`` times that many sklearn rounds and scales the time up
linearly (each round is the same work); the output says so.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.special import expit  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from harness.ratings import (  # noqa: E402
    ELO_SCALE,
    PairCounts,
    bootstrap_thetas,
    counts_from_indices,
    fit_bt,
    sandwich_se,
)


def synthetic(k: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1.0, k)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p = expit(theta[a] - theta[b])
    tie = 0.25 * np.ones(n)
    tie = np.minimum(tie, 2 * np.minimum(p, 1 - p))  # keeps E[share] = p exactly
    u = rng.random(n)
    outcome = np.where(u < tie, 2, np.where(u < tie + p - tie / 2, 0, 1))
    return theta, a, b, outcome


def ours(k: int, a: np.ndarray, b: np.ndarray, o: np.ndarray, rounds: int) -> dict[str, float | np.ndarray]:
    t0 = time.perf_counter()
    wins, ties = counts_from_indices(k, a, b, o)
    counts = PairCounts([f"m{i}" for i in range(k)], wins, ties)
    t1 = time.perf_counter()
    theta = fit_bt(counts.effective_wins)
    t2 = time.perf_counter()
    boots = bootstrap_thetas(counts, rounds, seed=1, theta0=theta)
    t3 = time.perf_counter()
    se = sandwich_se(counts, theta)
    t4 = time.perf_counter()
    return {"count": t1 - t0, "fit": t2 - t1, "bootstrap": t3 - t2, "sandwich": t4 - t3, "theta": theta,
            "boots": boots, "se": se}


def fastchat_lr_fit(df, models: list[str]) -> np.ndarray:  # type: ignore[no-untyped-def]
    """One fit of the earlier FastChat method on a vote table (columns model_a, model_b, winner)."""
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    def pivot(sub):  # type: ignore[no-untyped-def]
        t = pd.pivot_table(sub, index="model_a", columns="model_b", aggfunc="size", fill_value=0)
        return t.reindex(index=models, columns=models, fill_value=0)

    a_win = pivot(df[df["winner"] == "model_a"])
    b_win = pivot(df[df["winner"] == "model_b"])
    tie = pivot(df[df["winner"] == "tie"])
    tie = tie + tie.T
    win = a_win * 2 + b_win.T * 2 + tie
    k = len(models)
    w = win.to_numpy(dtype=float)
    rows, ys, weights = [], [], []
    for i in range(k):
        for j in range(k):
            if i == j or (w[i, j] == 0 and w[j, i] == 0):
                continue
            x = np.zeros(k)
            x[i], x[j] = math_log10, -math_log10
            rows += [x, x]
            ys += [1.0, 0.0]
            weights += [w[i, j], w[j, i]]
    lr = LogisticRegression(fit_intercept=False, penalty=None, tol=1e-6)
    with warnings.catch_warnings():  # sklearn >= 1.8 deprecates penalty=None; kept as FastChat wrote it
        warnings.simplefilter("ignore", FutureWarning)
        lr.fit(np.array(rows), np.array(ys), sample_weight=np.array(weights))
    return lr.coef_[0] * math_log10  # features were +-ln(10): coefficients are log10-odds, return natural


math_log10 = float(np.log(10.0))


def baseline(k: int, a: np.ndarray, b: np.ndarray, o: np.ndarray, rounds: int) -> dict[str, float | np.ndarray]:
    import pandas as pd

    models = [f"m{i}" for i in range(k)]
    names = np.array(models)
    df = pd.DataFrame({"model_a": names[a], "model_b": names[b],
                       "winner": np.array(["model_a", "model_b", "tie"])[o]})
    t0 = time.perf_counter()
    coef = fastchat_lr_fit(df, models)
    t1 = time.perf_counter()
    for r in range(rounds):
        fastchat_lr_fit(df.sample(frac=1.0, replace=True, random_state=r), models)
    t2 = time.perf_counter()
    return {"fit": t1 - t0, "bootstrap": t2 - t1, "coef": coef}


# ------------------------------------------------------------------------------------------------ intake

SERVER = """
import sys, uvicorn
from harness.leaderboard.arena import create_arena_app
from harness.leaderboard.arena.config import ArenaConfig
from harness.leaderboard.arena.demo import seed_text
cfg = ArenaConfig(secret="bench", votes_per_minute=10**9, votes_per_day=10**9, battles_per_minute=10**9,
                  stats_ttl_s=60.0)
app = create_arena_app(sys.argv[1], cfg)
seed_text(app.state.sessions, n_samples=200)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False)
"""


def intake(n_votes: int, clients: int) -> dict[str, float]:
    import socket

    import httpx
    from sqlalchemy import create_engine, text

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = Path(tempfile.mkdtemp(prefix="arena-bench-"))
    url = f"sqlite:///{tmp / 'arena.db'}"
    proc = subprocess.Popen([sys.executable, "-c", SERVER, url, str(port)])
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/api/arena/ratings?ci=sandwich", timeout=5)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("arena server did not start") from None
                time.sleep(0.2)
        per = n_votes // clients
        sessions = [httpx.Client(base_url=base, timeout=120) for _ in range(clients)]

        def fetch(c: httpx.Client) -> list[str]:
            return [c.get("/api/arena/battle").json()["token"] for _ in range(per)]

        t0 = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            tokens = list(pool.map(fetch, sessions))
        t1 = time.perf_counter()

        def post(args: tuple[httpx.Client, list[str]]) -> int:
            c, toks = args
            return sum(c.post("/api/arena/vote", json={"token": t, "outcome": "left"}).status_code == 200 for t in toks)

        with ThreadPoolExecutor(clients) as pool:
            ok = sum(pool.map(post, zip(sessions, tokens, strict=True)))
        t2 = time.perf_counter()
        for c in sessions:
            c.close()
        engine = create_engine(url)
        with engine.connect() as conn:
            stored = conn.execute(text("SELECT count(*) FROM arena_votes")).scalar()
        engine.dispose()
        return {"battles_per_s": per * clients / (t1 - t0), "votes_per_s": ok / (t2 - t1), "ok": ok,
                "stored": stored, "lost": ok - stored, "sent": per * clients}
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--votes", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--baseline-rounds", type=int, default=100)
    ap.add_argument("--intake-votes", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--skip-baseline", action="store_true")
    args = ap.parse_args()

    theta, a, b, o = synthetic(args.models, args.votes)
    truth = theta - theta.mean()
    print(f"{args.models} models, {args.votes:,} votes, ties {np.mean(o == 2):.1%}")
    r = ours(args.models, a, b, o, args.rounds)
    total = r["count"] + r["fit"] + r["bootstrap"]
    fit_boot = r["fit"] + r["bootstrap"]
    err = float(np.abs(r["theta"] - truth).max() * ELO_SCALE)
    lo, hi = np.quantile(r["boots"], [0.025, 0.975], axis=0)
    print(f"ours   count {r['count']:.3f} s  fit {r['fit']:.4f} s  bootstrap x{args.rounds} {r['bootstrap']:.3f} s  "
          f"sandwich {r['sandwich']:.4f} s")
    print(f"ours   fit + {args.rounds} rounds {fit_boot:.3f} s (with counting {total:.3f} s; target < 1 s)  "
          f"Spearman {spearmanr(r['theta'], theta).statistic:.5f}  max err {err:.2f} Elo  "
          f"truth in bootstrap CI {np.mean((lo <= truth) & (truth <= hi)):.0%}, "
          f"in sandwich CI {np.mean(np.abs(r['theta'] - truth) <= 1.96 * r['se']):.0%}")
    if not args.skip_baseline:
        br = min(args.baseline_rounds, args.rounds)
        base = baseline(args.models, a, b, o, br)
        scale = args.rounds / br if br else 0.0
        base_total = base["fit"] + base["bootstrap"] * scale
        coef = base["coef"] - base["coef"].mean()
        print(f"sklearn fit {base['fit']:.3f} s  bootstrap x{br} {base['bootstrap']:.2f} s"
              + (f" (scaled to x{args.rounds}: {base['bootstrap'] * scale:.1f} s)" if scale != 1 else "")
              + f"  Spearman {spearmanr(coef, theta).statistic:.5f}"
              f"  max |ours - sklearn| {np.abs(coef - r['theta']).max() * ELO_SCALE:.2f} Elo")
        print(f"RATIO fit + {args.rounds} bootstrap rounds: sklearn / ours = {base_total / fit_boot:.0f}x "
              f"({base_total:.1f} s vs {fit_boot:.3f} s; with our counting {base_total / total:.0f}x)")
    if args.intake_votes:
        it = intake(args.intake_votes, args.clients)
        print(f"intake (HTTP, SQLite, {args.clients} clients): battles served {it['battles_per_s']:.0f}/s, "
              f"votes {it['votes_per_s']:.0f}/s; sent {it['sent']}, accepted {it['ok']}, stored {it['stored']}, "
              f"lost {it['lost']}")


if __name__ == "__main__":
    main()
