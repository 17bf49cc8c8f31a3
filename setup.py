"""Maps the top-level tasks/, models/, leaderboard/ folders to harness.tasks, harness.models and
harness.leaderboard (the design card's layout under one import name). Metadata is in pyproject.toml."""

from setuptools import find_packages, setup

MAPPED = {"harness": "harness", "harness.tasks": "tasks", "harness.models": "models",
          "harness.leaderboard": "leaderboard"}

packages, package_dir = [], {}
for name, folder in MAPPED.items():
    package_dir[name] = folder
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=package_dir)
