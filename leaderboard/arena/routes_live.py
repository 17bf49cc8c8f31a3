"""Live battle pages and API: ``/arena/chat`` (the page), ``POST /api/arena/chat`` (a new battle:
its first turn streams back as server-sent events), ``POST /api/arena/chat/{battle}/turn`` (the next
turn), ``POST /api/arena/chat/{battle}/retry`` (regenerate a failed reply), ``POST
/api/arena/chat/{battle}/vote`` (the vote; the answer reveals the models), ``GET /api/arena/pool``
(the pool's health, for an admin token)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel
from sqlalchemy.orm import Session

from harness import families

from . import limits, live, moderation, pool, tokens, votes
from .routes import NO_STORE, _problem, _set_cookie, base_template, identity, router, state, templates

# the routes go onto the arena's one router (an included sub-router is not flattened into the app)
SSE_HEADERS = {**NO_STORE, "X-Accel-Buffering": "no"}  # a reverse proxy must not buffer the deltas


class ChatIn(BaseModel):
    prompt: str | None = None
    image: str | None = None  # a data: URL (PNG or JPEG)
    kind: str = "chat"


class TurnIn(BaseModel):
    token: str | None = None
    prompt: str | None = None


class LiveVoteIn(BaseModel):
    token: str | None = None
    outcome: str | None = None


class RetryIn(BaseModel):
    token: str | None = None


def _live(request: Request) -> tuple[pool.Clients, moderation.Chain]:
    st = state(request)
    extra = getattr(st, "live", None)
    if extra is None:
        extra = (pool.Clients(), moderation.from_config(st.cfg))
        st.live = extra  # type: ignore[attr-defined]
    return extra


def _refused(exc: live.LiveRefused) -> Response:
    resp = _problem(exc.status, exc.message)
    if exc.retry_after_s:
        import json

        body = json.loads(bytes(resp.body))
        body["retry_after_s"] = exc.retry_after_s
        resp = JSONResponse(body, status_code=exc.status, media_type="application/problem+json",
                            headers={**NO_STORE, "Retry-After": str(exc.retry_after_s)})
    return resp


def _pool_sizes(session: Session) -> dict[str, int]:
    return {k: len(pool.members(session, k)) for k in pool.known_kinds()}


def _kind_label(kind: str) -> str:
    live_kind = families.live_kind(kind)
    return live_kind.label if live_kind is not None else "Chat"


@router.get("/arena/chat", response_class=HTMLResponse, include_in_schema=False)
def chat_page(request: Request) -> Response:
    st = state(request)
    new_cookie, voter, ip = identity(request, st)
    with request.app.state.sessions() as s:
        sizes = _pool_sizes(s)
        wait = limits.wait_seconds(s, st.cfg, voter, ip)
    message = None
    if all(n < 2 for n in sizes.values()):
        message = live.empty_pool_message(pool.CHAT, sizes[pool.CHAT])
    ctx = {"base": base_template(), "title": "Arena: live", "nav": "arena", "page_title": "Arena: live",
           "message": message, "wait": wait, "wait_message": limits.refusal(wait) if wait else "",
           "kinds": [(k, _kind_label(k)) for k in pool.known_kinds() if sizes[k] >= 2], "max_turns": st.cfg.max_turns,
           "max_chars": st.cfg.max_prompt_chars, "max_retries": st.cfg.live_retries, "themed": True}
    resp = templates.TemplateResponse(request, "chat.html", ctx, headers=NO_STORE)
    return _set_cookie(request, resp, new_cookie)


def _renderer(request: Request, kind: str) -> Any:
    from .render3d import renderer_for

    return renderer_for(request.app, state(request).cfg, kind)


@router.post("/api/arena/chat", tags=["arena"])
async def chat_start(request: Request, body: ChatIn) -> Response:
    """A new live battle: checks (limits first, then prompt, image, moderation), then two anonymous
    pool models answer, streamed as server-sent events (see leaderboard/arena/live.py)."""
    st = state(request)
    clients, mod = _live(request)
    new_cookie, voter, ip = identity(request, st)
    sessions = request.app.state.sessions
    try:
        if body.kind not in pool.known_kinds():
            raise live.LiveRefused(400, f"kind must be one of {', '.join(pool.known_kinds())}")
        with sessions() as s:
            wait = limits.wait_seconds(s, st.cfg, voter, ip)
        if wait:
            raise live.LiveRefused(429, limits.refusal(wait), wait)
        prompt = live.check_prompt(body.prompt, st.cfg)
        image = live.decode_image(body.image, st.cfg)
        reason = await mod.check(prompt)
        if reason:
            raise live.LiveRefused(422, reason)
        battle = live.start(sessions, st.cfg, st.cache, st.secret, voter, ip, prompt, image, body.kind)
    except live.LiveRefused as exc:
        return _set_cookie(request, _refused(exc), new_cookie)
    first = {"type": "battle", "battle": battle.public_id, "token": battle.token, "max_turns": st.cfg.max_turns,
             "kind": battle.kind}
    stream = live.run_turn(sessions, st.cfg, clients, battle.public_id, prompt, first_event=first,
                           renderer=_renderer(request, battle.kind),
                           media_url=lambda slot: f"/arena/media/{battle.public_id}/{slot}")
    resp = StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)
    return _set_cookie(request, resp, new_cookie)


@router.post("/api/arena/chat/{battle}/turn", tags=["arena"])
async def chat_turn(request: Request, battle: str, body: TurnIn) -> Response:
    """The next turn of a live battle (at most ``max_turns``; not after the vote)."""
    st = state(request)
    clients, mod = _live(request)
    _, voter, _ = identity(request, st)
    sessions = request.app.state.sessions
    try:
        prompt = live.check_prompt(body.prompt, st.cfg)
        reason = await mod.check(prompt)
        if reason:
            raise live.LiveRefused(422, reason)
        with sessions() as s:
            b, chat = live.check_token(s, st.secret, st.cfg, battle, body.token, voter)
            live.claim_turn(s, b, chat, st.cfg)
            kind = chat.kind
    except live.LiveRefused as exc:
        return _refused(exc)
    stream = live.run_turn(sessions, st.cfg, clients, battle, prompt, renderer=_renderer(request, kind),
                           media_url=lambda slot: f"/arena/media/{battle}/{slot}")
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)


@router.post("/api/arena/chat/{battle}/retry", tags=["arena"])
async def chat_retry(request: Request, battle: str, body: RetryIn) -> Response:
    """Regenerate the last turn's failed replies: the same prompt to the same model of each failed
    side (at most ``live_retries`` times a turn; never after the vote). Streams like a turn, starting
    with a ``retry`` event naming the sides."""
    st = state(request)
    clients, _ = _live(request)
    _, voter, _ = identity(request, st)
    sessions = request.app.state.sessions
    try:
        with sessions() as s:
            b, chat = live.check_token(s, st.secret, st.cfg, battle, body.token, voter)
            sides = live.claim_retry(s, b, chat, st.cfg)
            kind = chat.kind
    except live.LiveRefused as exc:
        return _refused(exc)
    stream = live.run_turn(sessions, st.cfg, clients, battle, "", renderer=_renderer(request, kind),
                           media_url=lambda slot: f"/arena/media/{battle}/{slot}", retry=sides)
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)


@router.get("/api/arena/pool", tags=["arena"])
def api_pool(request: Request) -> Response:
    """Each live pool model's health: the probe ``pool add`` sent, the last reply that worked and the
    last that failed (with its reason), failures in a row and in the last hour. An admin token only
    (``Authorization: Bearer``): a failure's time, seen during an open battle, would tell its voter
    which model the failed side was."""
    from datetime import UTC, datetime

    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return _problem(401, "the pool's health needs 'Authorization: Bearer <admin token>' (the server's own "
                             "write token, see `harness serve --write-token-env`); `harness arena pool list` shows "
                             "it too")
    from ..tokens import identify

    who = identify(request.app.state.sessions, token.strip(), getattr(request.app.state, "write_token", None))
    if who is None or not who.admin:
        return _problem(403, "the pool's health is for admin tokens only")
    with request.app.state.sessions() as s:
        models = pool.health(s, datetime.now(UTC).replace(tzinfo=None))
    return JSONResponse({"models": models}, headers=NO_STORE)


@router.post("/api/arena/chat/{battle}/vote", tags=["arena"])
def chat_vote(request: Request, battle: str, body: LiveVoteIn) -> Response:
    """Vote on a live battle (left, right, tie, both_bad) once both replies have finished; the answer
    names both models. The vote is checked and written in one transaction (votes.cast_vote with the
    live checks of live.admit_vote: no turn running, the self-naming flag set as it is written)."""
    st = state(request)
    _, voter, ip = identity(request, st)
    sessions = request.app.state.sessions
    try:
        with sessions() as s:
            live.check_token(s, st.secret, st.cfg, battle, body.token, voter)
        result = votes.cast_vote(sessions, st.cfg, st.secret, body.token, body.outcome, voter, ip, kind=tokens.LIVE)
    except live.LiveRefused as exc:
        return _refused(exc)
    except votes.VoteRefused as exc:
        return _problem(exc.status, exc.message)
    with sessions() as s:
        shown = live.reveal(s, battle)
    return JSONResponse({**result.to_dict(), **shown, "counted": not result.flagged}, headers=NO_STORE)
