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
  (generated data a demo or a newcomer can evaluate on without downloads);
- ``docs``: the family's README, relative to its package.

The core and the leaderboard reach a family only through these strings (see
:mod:`harness.families`); they never import ``harness.tasks.<family>`` by name.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    docs: str = "README.md"
    package: str = ""  # the family's package (for docs and data); default: the manifest's package

    @property
    def command(self) -> str:
        return self.cli_name or self.name
