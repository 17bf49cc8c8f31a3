"""One module object per file, whatever checkout or name it is imported from, and an outside family
that type-checks against the installed harness.

setup.py maps the folders tasks/, models/ and leaderboard/ to harness.tasks, harness.models and
harness.leaderboard. Imported under their folder names (``import tasks`` from the repository root) the
same files would load twice, as other module objects; from a second checkout, an editable install of
the first one would answer those three names with the first checkout's folders. A family outside the
tree must find harness's types in an installed (non-editable) harness.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from requirements import require

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "tests" / "plugins" / "harness_wordcount" / "src" / "harness_wordcount"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_ROOT")}


def _python(code: str, cwd: Path, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-c", code], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120)


def test_a_folder_imported_under_its_own_name_is_refused_in_one_line() -> None:
    for folder, module in (("tasks", "tasks.gsm8k"), ("models", "models.builtin"), ("leaderboard", "leaderboard")):
        run = _python(f"import {module}", ROOT)
        assert run.returncode == 1, run.stderr
        assert run.stderr.strip().splitlines()[-1] == (
            f"ImportError: import harness.{folder}..., not {folder}...: this folder is harness.{folder}"), run.stderr


def test_a_task_module_loads_once_whatever_name_is_tried() -> None:
    # the repository root is on sys.path (python -c), as it is for tools run from there
    code = """
import importlib, json, sys
import harness.tasks.gsm8k.task as task
refused = []
for other in ("tasks.gsm8k.task", "tasks.gsm8k", "tasks"):
    try:
        importlib.import_module(other)
    except ImportError as exc:
        refused.append(str(exc))
same_file = [name for name, m in list(sys.modules.items()) if getattr(m, "__file__", None) == task.__file__]
print(json.dumps({"refused": refused, "same_file": same_file, "file": task.__file__}))
"""
    run = _python(code, ROOT)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert len(out["refused"]) == 3 and all("import harness.tasks..." in r for r in out["refused"])
    assert out["same_file"] == ["harness.tasks.gsm8k.task"]
    assert Path(out["file"]) == ROOT / "tasks" / "gsm8k" / "task.py"


def _second_checkout(dest: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore) copied to another folder."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    for rel in files:
        if (ROOT / rel).is_file() and "__pycache__" not in rel:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    return dest


def test_a_second_checkout_imports_only_its_own_files(tmp_path: Path) -> None:
    second = _second_checkout(tmp_path / "second")
    shutil.rmtree(second / "tasks" / "mmlu")  # a family only the first checkout has
    code = """
import json
import harness, harness.tasks, harness.models, harness.leaderboard
import harness.tasks.gsm8k.task, harness.models.builtin, harness.leaderboard.media
files = [m.__file__ for m in (harness, harness.tasks, harness.models, harness.leaderboard, harness.tasks.gsm8k.task,
                              harness.models.builtin, harness.leaderboard.media)]
try:
    import harness.tasks.mmlu
    missing = "imported from " + harness.tasks.mmlu.__file__
except ModuleNotFoundError as exc:
    missing = str(exc)
print(json.dumps({"files": files, "missing": missing}))
"""
    run = _python(code, second)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert len(out["files"]) == 7
    for file in out["files"]:
        assert Path(file).resolve().is_relative_to(second.resolve()), (file, out["files"])
    # not filled in from the first checkout (where this interpreter's editable install may point)
    assert out["missing"] == "No module named 'harness.tasks.mmlu'"


def test_an_outside_family_type_checks_strictly_against_the_installed_wheel(harness_wheel_venv: Path,
                                                                            tmp_path: Path) -> None:
    require("mypy", "the outside family's type check runs mypy (the lint extra)")
    python = str(harness_wheel_venv / "bin" / "python")
    # the wheel leaves the import machinery alone: nothing of the checkout finder is installed there
    plain = _python("import sys, harness; print(any(hasattr(f, '_harness_checkout_finder') for f in sys.meta_path))",
                    tmp_path, python)
    assert plain.returncode == 0 and plain.stdout.strip() == "False", plain.stderr
    # run outside the checkout with an empty config: the repository's [tool.mypy] ignores missing imports,
    # and from its root mypy would read the source folder harness/ instead of the installed package
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n")

    def mypy(*targets: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", str(config), "--cache-dir",
                               str(tmp_path / "cache"), "--python-executable", python, *targets], cwd=tmp_path,
                              env=_env(), capture_output=True, text=True, timeout=300)

    checked = mypy(str(PLUGIN))
    assert "Cannot find implementation or library stub" not in checked.stdout, checked.stdout
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the types are really harness's: a wrong call into it is caught
    wrong = tmp_path / "wrong.py"
    wrong.write_text("from harness import Usage\n\nUSAGE = Usage(calls='one')\n")
    caught = mypy(str(wrong))
    assert caught.returncode == 1 and 'incompatible type "str"; expected "int"' in caught.stdout, caught.stdout
