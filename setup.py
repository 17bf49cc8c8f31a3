"""Maps the top-level tasks/, models/, leaderboard/ folders to harness.tasks, harness.models and
harness.leaderboard (the design card's layout under one import name). Metadata is in pyproject.toml.

Every folder below the four roots is a package here, with or without ``__init__.py``: data folders
(``harness/store/migrations/versions``, ``models/aliases``, ``tasks/*/prompts``, ``tasks/code3d/references``,
``leaderboard/templates`` ...) are read at run time from the installed package, and setuptools only
copies package data and modules of folders it knows as packages. tests/test_packaging.py checks that
the wheel holds every tracked file of these folders."""

from setuptools import find_namespace_packages, setup

MAPPED = {"harness": "harness", "harness.tasks": "tasks", "harness.models": "models",
          "harness.leaderboard": "leaderboard"}

SKIP = ["*__pycache__*", ".*", "*.egg-info"]

packages, package_dir = [], {}
for name, folder in MAPPED.items():
    package_dir[name] = folder
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_namespace_packages(folder, exclude=SKIP)]

setup(packages=packages, package_dir=package_dir)
