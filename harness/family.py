"""A task family is the unit of extension: one folder, one manifest, one entry point.

A family package (built in under ``harness.tasks.<name>`` or any installed distribution) exports a
:class:`Family` and registers it under the entry-point group ``harness.families``::

    [project.entry-points."harness.families"]
    conformal = "harness.tasks.conformal.family:FAMILY"

Everything the family contributes is named in the manifest by *import string*, so reading the
manifests (to list the CLI subcommands, say) imports none of the family's code; ``harness --help``
stays fast however many families are installed:

- ``tasks`` / ``backends``: modules whose ``@task`` / ``@model`` decorators register on import;
- ``cli``: ``"module:attr"`` of a ``typer.Typer`` mounted as ``harness <cli_name or name> ...``;
- ``charts``: ``"module:function"`` ``chart(sessions, task_name) -> dict | None`` (a plotly figure
  as JSON) drawn on the leaderboard's task page;
- ``public_view``: ``"module"`` with ``is_hidden(metadata) -> bool``, ``redact_details(details)``
  and ``redact_row(row)``: the rule that keeps harmful text off public pages;
- ``fixture``: ``"module:function"`` ``write(folder)`` that writes the family's offline fixture
  (generated data a demo or a newcomer can evaluate on without downloads) into an empty folder;
- ``demo``: the family's runs in ``harness demo`` (:class:`DemoRun`: task, model, options, settings,
  size, needs); ``{fixture}`` in an option value is the folder ``fixture`` wrote;
- ``docs``: the family's README, relative to its package;
- ``arena_display``: how a person judges the family's tasks in the arena (``"text"``, ``"image"``,
  ``"render"``, ``"video+audio"``, or ``"none"``: never served); None: told from a task's modalities;
- ``arena_category``: the ``kind`` category of every arena battle on the family's tasks (``"3d"``);
  None: told from the prompt;
- ``live``: the live-arena kinds the family adds besides ``chat`` (:class:`LiveKind`: its name, the
  page's label, the ``"module:function"`` renderer its replies go through).

The core and the leaderboard reach a family only through these strings (see
:mod:`harness.families`); they never import ``harness.tasks.<family>`` by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

DemoSize = Literal["small", "full"]
ArenaDisplay = Literal["text", "image", "render", "video+audio", "none"]


@dataclass(frozen=True, slots=True)
class DemoRun:
    """One run of ``harness demo``: ``task`` evaluated by ``model`` with ``-T options`` and ``-M
    settings``, offline on the family's fixture or generated data.

    ``size``: ``"small"`` runs in every demo (keep its budget tiny: steps, samples, ``limit``: the
    whole small demo has to stay short on 2 cores), ``"full"`` only in ``--size full``.
    ``full_options`` / ``full_settings`` / ``full_limit`` replace ``options`` / ``settings`` keys
    and ``limit`` at full size.
    ``needs``: importable modules, or ``"blender"`` (the bpy venv, ``harness.blender``), without
    which the run is skipped; ``install`` says in one line how to get the modules (the skip line
    prints it). ``judge``: a stub judge (``builtin:constant``) whose ``judge_settings`` text must
    say "stub judge". ``renders_3d``: the run's outputs are Blender renders the demo's arena serves
    as its 3D battles."""

    task: str
    model: str
    options: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    size: DemoSize = "small"
    needs: tuple[str, ...] = ()
    install: str = ""
    limit: int | None = None
    full_options: dict[str, Any] = field(default_factory=dict)
    full_settings: dict[str, Any] = field(default_factory=dict)
    full_limit: int | None = None
    judge: str | None = None
    judge_settings: dict[str, Any] = field(default_factory=dict)
    renders_3d: bool = False


@dataclass(frozen=True, slots=True)
class LiveKind:
    """A kind of live arena battle a family adds (``harness arena pool add SPEC --kind NAME``):
    pool models of this kind answer the voter's prompt, and each reply goes through ``renderer``.

    ``renderer``: ``"module:function"`` ``make(workers: int) -> render``, where ``async render(reply,
    out_dir) -> {"status": "OK" | ..., "renders": [paths], "error": str}`` (built once per server;
    ``workers`` is ``ArenaConfig.live_render_workers``); None: the replies are shown as text.
    ``render_timeout_s``: how long both sides' renders of one turn may take. ``category``: the
    battles' ``kind`` category (leaderboard/arena/categories.py). Battles are stored under the task
    ``<name>-live``."""

    name: str
    label: str
    renderer: str | None = None
    render_timeout_s: float = 0.0
    category: str | None = None

    @property
    def task(self) -> str:
        return f"{self.name}-live"


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    title: str = ""
    tasks: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    cli: str | None = None
    cli_name: str | None = None
    cli_help: str = ""
    charts: str | None = None
    public_view: str | None = None
    fixture: str | None = None  # "module:function(folder)": writes the offline fixture `harness demo` uses
    demo: tuple[DemoRun, ...] = ()  # the family's runs in `harness demo`
    docs: str = "README.md"
    package: str = ""  # the family's package (for docs and data); default: the manifest's package
    arena_display: ArenaDisplay | None = None  # how a person judges its tasks in the arena
    arena_category: str | None = None  # the "kind" category of its arena battles ("3d")
    live: tuple[LiveKind, ...] = ()  # live-arena kinds besides "chat"

    @property
    def command(self) -> str:
        return self.cli_name or self.name
