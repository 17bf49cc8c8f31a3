"""Data files that ship inside the installed package (alias cards, migrations, prompts, templates).

They are found through ``importlib.resources`` from the installed modules, never from a checkout,
so a wheel installed anywhere reads its own copies. A package built without its data fails with
one line that names the missing folder instead of behaving as if the folder were empty.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


class MissingResourceError(FileNotFoundError):
    """A data folder the package needs is absent from this installation (``harness.cli.main`` prints
    it as one line)."""


def package_data(package: str, *parts: str) -> Path:
    """The folder or file ``parts`` inside installed package ``package``; raises MissingResourceError
    when the installation lacks it."""
    path = Path(str(files(package).joinpath(*parts)))
    if not path.exists():
        where = package.replace(".", "/") + "/" + "/".join(parts)
        raise MissingResourceError(
            f"this harness installation is missing {where} (at {path}); reinstall it from a complete wheel"
        )
    return path
