"""Arena pages and JSON API (a FastAPI router the leaderboard app includes).

Pages: ``/arena`` (a battle; POST ``/arena/vote`` reveals), ``/arena/ratings`` (table, heatmaps, CI
chart), ``/arena/media/{battle}/{slot}`` (opaque per-battle media). JSON: ``/api/arena/battle``,
``/api/arena/vote``, ``/api/arena/ratings``, ``/api/arena/votes`` (every raw vote, for reproducing
the ratings). The app must provide ``app.state.sessions`` (a sessionmaker on the results DB).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Form, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import ChoiceLoader, Environment, FileSystemLoader, select_autoescape
from pydantic import BaseModel
from sqlalchemy import select

from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow

from ..assets import Assets
from . import battles, failures, limits, media, standings, tokens, votes
from .config import ArenaConfig, config_from_app, media_roots
from .keys import or_label

HERE = Path(__file__).resolve().parent
LEADERBOARD = HERE.parent
COOKIE = "arena_voter"
NO_STORE = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def _plotly_path() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / "package_data" / "plotly.min.js" if locations else None
    return path if path is not None and path.is_file() else None


# the arena's own files and (for an app without the leaderboard's copy) plotly.js: served from memory,
# gzipped once, under /arena/assets/NAME?v=HASH and cached for a year, as leaderboard/assets.py does
_plotly = _plotly_path()
ARENA_ASSETS = Assets(HERE / "static", {"plotly.min.js": _plotly} if _plotly else {})
LEADERBOARD_ASSETS = Assets(LEADERBOARD / "static", {"plotly.min.js": _plotly} if _plotly else {})


def arena_asset(name: str) -> str:
    """``/arena/assets/NAME?v=VERSION`` (VERSION hashes the file: a changed file is a new URL)."""
    asset = ARENA_ASSETS.get(name)
    return f"/arena/assets/{name}" + (f"?v={asset.version}" if asset else "")

_env = Environment(
    loader=ChoiceLoader([FileSystemLoader(str(HERE / "templates")), FileSystemLoader(str(LEADERBOARD / "templates"))]),
    autoescape=select_autoescape(["html"]),
)
try:  # the leaderboard's base.html and its macros use the leaderboard's filters
    from ..templating import ci as _ci
    from ..templating import num as _num
    from ..templating import plural as _plural
    from ..templating import pretty as _pretty
    from ..templating import query as _query
    from ..templating import when as _when

    _env.filters.update(num=_num, pretty=_pretty, when=_when, plural=_plural)
    _env.globals.update(ci=_ci, query=_query)
except ImportError:  # the arena on its own
    pass
# base.html links style.css and theme.js through static_url(): versioned here as on the leaderboard's pages
_env.globals.update(asset=LEADERBOARD_ASSETS.url, arena_asset=arena_asset)
templates = Jinja2Templates(env=_env)
router = APIRouter()
_init_lock = threading.Lock()


def base_template() -> str:
    """The leaderboard's base.html when it exists, else the arena's own minimal one."""
    return "base.html" if (LEADERBOARD / "templates" / "base.html").is_file() else "arena_base.html"


def plotly_src(app: Any) -> str:
    """plotly.js (4.8 MB, 1.4 MB gzipped) under a versioned URL: the leaderboard's
    /static/plotly.min.js?v=HASH when the app serves it, else our own copy's. Pages load it only
    where a chart is drawn (the ratings page with a table) or a mesh is opened (on the click)."""
    assets = getattr(app.state, "assets", None)
    if isinstance(assets, Assets) and assets.get("plotly.min.js") is not None:
        return assets.url("plotly.min.js")
    if any(getattr(r, "path", "") == "/static/plotly.min.js" for r in app.routes):
        return LEADERBOARD_ASSETS.url("plotly.min.js")
    return arena_asset("plotly.min.js")


class State:
    def __init__(self, cfg: ArenaConfig, secret: bytes) -> None:
        self.cfg = cfg
        self.secret = secret
        self.cache = battles.StatsCache()
        self.ratings: dict[tuple[Any, ...], tuple[float, standings.Standings]] = {}


def state(request: Request) -> State:
    app = request.app
    st = getattr(app.state, "arena", None)
    if st is None:
        with _init_lock:
            st = getattr(app.state, "arena", None)
            if st is None:
                cfg = config_from_app(app)
                st = State(cfg, tokens.load_secret(app.state.sessions, cfg.secret))
                app.state.arena = st
    return st


def client_ip(request: Request, cfg: ArenaConfig) -> str:
    """The voter's address: the peer, unless the peer is a configured proxy; then the right-most
    X-Forwarded-For entry that is not a trusted proxy (each proxy appends the address it saw, so
    everything left of that is the client's to invent)."""
    peer = request.client.host if request.client else "unknown"
    nets = proxy_networks(tuple(cfg.trusted_proxies))
    if not nets or not _trusted(peer, nets):
        return peer
    hops = [h.strip() for h in ",".join(request.headers.getlist("x-forwarded-for")).split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, nets):
            return hop
    return hops[0] if hops else peer


@functools.lru_cache(maxsize=32)
def proxy_networks(entries: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(e, strict=False) for e in entries)


def _trusted(address: str, nets: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in nets)


def served_over_https(request: Request, cfg: ArenaConfig) -> bool:
    """HTTPS to the voter: our own scheme, or X-Forwarded-Proto from a trusted proxy."""
    if request.url.scheme == "https":
        return True
    peer = request.client.host if request.client else ""
    nets = proxy_networks(tuple(cfg.trusted_proxies))
    proto = request.headers.get("x-forwarded-proto", "").split(",")[-1].strip().lower()
    return bool(nets) and _trusted(peer, nets) and proto == "https"


def identity(request: Request, st: State) -> tuple[str | None, str, str]:
    """(new cookie value if one must be set, voter hash, ip hash)."""
    cookie = request.cookies.get(COOKIE)
    new = None
    if not cookie or len(cookie) > 64:
        cookie = new = secrets.token_urlsafe(16)
    ip = client_ip(request, st.cfg)
    return new, tokens.keyed_hash(st.secret, "voter", cookie), tokens.keyed_hash(st.secret, "ip", ip)


def _set_cookie(request: Request, response: Response, value: str | None) -> Response:
    if value:
        secure = served_over_https(request, state(request).cfg)
        response.set_cookie(COOKIE, value, max_age=365 * 86400, httponly=True, samesite="lax", secure=secure)
    return response


def _battle(request: Request, task: str | None) -> tuple[dict[str, Any] | None, str | None, str | None, int]:
    """(battle view, refusal message, cookie to set, status)."""
    st = state(request)
    new_cookie, voter, ip = identity(request, st)
    with request.app.state.sessions() as s:
        # checked before anything is served: nobody reads a battle whose vote would be refused
        wait = limits.wait_seconds(s, st.cfg, voter, ip)
        if wait:
            return None, limits.refusal(wait), new_cookie, 429
        try:
            view = battles.create_battle(s, st.cfg, st.cache, st.secret, voter, ip, media_roots(request.app, st.cfg),
                                         task or None)
        except battles.NoBattle as exc:
            return None, str(exc), new_cookie, 404
        except battles.Limited:
            return None, "Too many battles requested: wait a minute.", new_cookie, 429
    return view, None, new_cookie, 200


def _tasks(request: Request) -> list[str]:
    st = state(request)
    with request.app.state.sessions() as s:
        candidates, _ = battles.cached(st.cache, st.cfg, s, None)
    return sorted(candidates)


@router.get("/arena", response_class=HTMLResponse, include_in_schema=False)
def arena_page(request: Request, task: str | None = None) -> Response:
    view, message, cookie, status = _battle(request, task)
    # a side that did not answer: the vote buttons are disabled (and the vote endpoints refuse it)
    votable = view is not None and all(failures.answered_view(view[s]) for s in ("left", "right"))
    ctx = {"base": base_template(), "battle": view, "message": message, "task": task or "", "tasks": _tasks(request),
           "plotly_src": plotly_src(request.app), "votable": votable, "themed": True,
           "title": "Arena", "nav": "arena", "page_title": "Arena"}
    resp = templates.TemplateResponse(request, "arena.html", ctx, status_code=status, headers=NO_STORE)
    return _set_cookie(request, resp, cookie)


@router.post("/arena/vote", response_class=HTMLResponse, include_in_schema=False)
def arena_vote_form(
    request: Request, token: str | None = Form(None), outcome: str | None = Form(None), task: str = Form("")
) -> Response:
    st = state(request)
    _, voter, ip = identity(request, st)
    try:
        result = votes.cast_vote(request.app.state.sessions, st.cfg, st.secret, token, outcome, voter, ip,
                                 kind=tokens.STORED)  # a live battle's token is refused here
    except votes.VoteRefused as exc:
        ctx: dict[str, Any] = {"base": base_template(), "message": exc.message, "task": task, "title": "Vote refused",
                               "nav": "arena", "themed": True}
        return templates.TemplateResponse(request, "refused.html", ctx, status_code=exc.status, headers=NO_STORE)
    with request.app.state.sessions() as s:
        row = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == result.battle))
        view = battles.describe(s, row) if row else None
    ctx = {"base": base_template(), "battle": view, "result": result, "task": task, "title": "Arena: result",
           "nav": "arena", "themed": True}
    return templates.TemplateResponse(request, "reveal.html", ctx, headers=NO_STORE)


@router.get("/arena/media/{battle}/{slot}", include_in_schema=False)
def arena_media(request: Request, battle: str, slot: str) -> Response:
    with request.app.state.sessions() as s:
        paths = s.scalar(select(ArenaBattleRow.media).where(ArenaBattleRow.public_id == battle)) or {}
    st = state(request)
    real = media.resolve(paths.get(slot, ""), media_roots(request.app, st.cfg)) if slot in paths else None
    if real is None:
        raise HTTPException(404, "no such media")
    data, kind = media.clean_bytes(real)
    return Response(data, media_type=kind, headers=NO_STORE)


ASSETS = ("arena.css", "arena.js", "chat.css", "chat.js", "plotly.min.js")


@router.get("/arena/mesh/{battle}/{side}", include_in_schema=False)
def arena_mesh(request: Request, battle: str, side: str) -> Response:
    """The battle's mesh for one side as a plotly mesh3d figure (vertices and faces only)."""
    from .mesh import MeshError, mesh_figure, read_mesh

    with request.app.state.sessions() as s:
        paths = s.scalar(select(ArenaBattleRow.media).where(ArenaBattleRow.public_id == battle)) or {}
    slot = f"m{side}"
    real = media.resolve(paths.get(slot, ""), media_roots(request.app, state(request).cfg)) if slot in paths else None
    if real is None:
        raise HTTPException(404, "no such mesh")
    try:
        figure = mesh_figure(*read_mesh(real))
    except (MeshError, KeyError, IndexError, ValueError) as exc:
        return JSONResponse({"error": f"mesh cannot be shown: {exc}"}, status_code=422, headers=NO_STORE)
    return JSONResponse(figure, headers=NO_STORE)


@router.get("/arena/assets/{name}", include_in_schema=False)
def arena_asset_file(request: Request, name: str) -> Response:
    answer = ARENA_ASSETS.response(request, name) if name in ASSETS else None
    if answer is None:
        raise HTTPException(404, "no such asset")
    return answer


def _standings(request: Request, task: str | None, style: bool, ci: str, rounds: int | None,
               category: str | None = None) -> standings.Standings:
    st = state(request)
    cfg = st.cfg
    key = (task, style, ci, rounds, category)
    hit = st.ratings.get(key)
    if hit and time.monotonic() - hit[0] < cfg.stats_ttl_s:
        return hit[1]
    with request.app.state.sessions() as s:
        result = standings.compute(
            s, task, ci=ci, rounds=cfg.bootstrap_rounds if rounds is None else rounds, min_votes=cfg.min_votes,
            provisional_votes=cfg.provisional_votes, exclude_implausible=cfg.exclude_implausible,
            outlier_min_votes=cfg.outlier_min_votes, style=style, category=category,
            now=battles.naive_utc(cfg.clock()),
        )
    st.ratings[key] = (time.monotonic(), result)
    return result


def _category_standings(request: Request, task: str | None, style: bool, ci: str, rounds: int | None,
                        category: str | None) -> standings.Standings:
    try:
        return _standings(request, task, style, ci, rounds, category)
    except ValueError as exc:  # an unknown category key
        raise HTTPException(400, str(exc)) from None


def _categories(request: Request) -> dict[str, dict[str, int]]:
    with request.app.state.sessions() as s:
        return standings.category_summary(s)


def _vote_tasks(request: Request) -> list[str]:
    with request.app.state.sessions() as s:
        return sorted(t for (t,) in s.execute(select(ArenaVoteRow.task).distinct()))


@router.get("/arena/ratings", response_class=HTMLResponse, include_in_schema=False)
def ratings_page(request: Request, task: str | None = None, style: bool = False, ci: str = "bootstrap",
                 category: str | None = None) -> Response:
    if ci not in ("bootstrap", "sandwich"):
        raise HTTPException(400, "ci must be bootstrap or sandwich")
    result = _category_standings(request, task or None, style, ci, None, category or None)
    win, count = standings.heatmaps(result)
    figures = {"ci": standings.ci_chart(result), "win": win, "count": count}
    # JSON inside <script type="application/json">: escaping "<" means no model name can close the tag
    figures_json = {k: json.dumps(v).replace("<", "\\u003c") for k, v in figures.items()}
    ctx = {"base": base_template(), "st": result, "task": task or "", "tasks": _vote_tasks(request), "style": style,
           "ci": ci, "cfg": state(request).cfg, "figures": figures_json, "plotly_src": plotly_src(request.app),
           "category": category or "", "categories": _categories(request), "themed": True,
           "title": "Arena ratings", "nav": "arena", "page_title": "Arena ratings"}
    return templates.TemplateResponse(request, "ratings.html", ctx)


# ---------------------------------------------------------------------------------------------- JSON


def _problem(status: int, message: str) -> JSONResponse:
    """The API's error shape (an RFC 9457 problem, as everywhere under /api/), plus ``error`` for
    clients written against the arena's first API."""
    from http import HTTPStatus

    body = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status, "detail": message,
            "error": message}
    return JSONResponse(body, status_code=status, headers=NO_STORE, media_type="application/problem+json")


class VoteIn(BaseModel):
    token: str | None = None
    outcome: str | None = None


@router.get("/api/arena/battle", tags=["arena"])
def api_battle(request: Request, task: str | None = None) -> Response:
    """A new battle: prompt, two anonymous outputs, a single-use token. Names come after the vote."""
    view, message, cookie, status = _battle(request, task)
    resp = JSONResponse(view, headers=NO_STORE) if view is not None else _problem(status, message or "")
    return _set_cookie(request, resp, cookie)


@router.post("/api/arena/vote", tags=["arena"])
def api_vote(request: Request, vote: VoteIn) -> Response:
    """Cast a vote (left, right, tie, both_bad) with a stored battle's token; the answer reveals the
    models. Live battles are voted on at ``/api/arena/chat/{battle}/vote``."""
    st = state(request)
    _, voter, ip = identity(request, st)
    try:
        result = votes.cast_vote(request.app.state.sessions, st.cfg, st.secret, vote.token, vote.outcome, voter, ip,
                                 kind=tokens.STORED)  # a live battle's token is refused here
    except votes.VoteRefused as exc:
        return _problem(exc.status, exc.message)
    return JSONResponse(result.to_dict(), headers=NO_STORE)


@router.get("/api/arena/ratings", tags=["arena"])
def api_ratings(
    request: Request, task: str | None = None, style: bool = False, ci: str = "bootstrap",
    bootstrap: int | None = Query(None, ge=0, le=2000), category: str | None = None,
) -> dict[str, Any]:
    """Bradley-Terry ratings with 95% CIs and rank (UB); implausible voters excluded. ``category``:
    ``family=``, ``language=``, ``length=``, ``kind=`` (text, code, 3d) or a bare value."""
    if ci not in ("bootstrap", "sandwich"):
        raise HTTPException(400, "ci must be bootstrap or sandwich")
    result = _category_standings(request, task or None, style, ci, bootstrap, category or None)
    out = result.ratings.to_dict()
    out.update({"task": task, "category": category, "style_control": result.style, "votes_used": result.votes_used,
                "excluded_voters": len(result.excluded), "keys": result.keys, "failures": result.failures})
    return out


@router.get("/api/arena/votes", tags=["arena"])
def api_votes(request: Request, task: str | None = None, limit: int = Query(10000, ge=1, le=1_000_000),
              offset: int = Query(0, ge=0, le=2**63 - 1)) -> list[dict[str, Any]]:
    """Raw votes (pseudonymous voter and IP hashes), oldest first, for reproducing the ratings."""
    q = select(ArenaVoteRow).order_by(ArenaVoteRow.id).offset(offset).limit(limit)
    if task:
        q = q.where(ArenaVoteRow.task == task)
    with request.app.state.sessions() as s:
        rows = s.scalars(q).all()
    return [
        {"id": r.id, "task": r.task, "sample_id": r.sample_id, "left_model": r.left_model,
         "right_model": r.right_model, "left_key": or_label(r.left_key, r.left_model),
         "right_key": or_label(r.right_key, r.right_model), "outcome": r.outcome, "voter_hash": r.voter_hash,
         "ip_hash": r.ip_hash,
         "served_at": r.served_at.isoformat(), "created_at": r.created_at.isoformat(), "flagged": r.flagged,
         "flag_reason": r.flag_reason}
        for r in rows
    ]
