"""Project rules that are checked, not just hoped for."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "minitrans"
# Host-side modules that may use NumPy themselves: the backend that chooses
# the library, the strict test backend built on it, the checker, and the
# data and checkpoint code, which work on host copies of arrays (padding
# token ids, reading and writing files), and the lessons' exercise checkers,
# which hand learners plain NumPy arrays.
HOST_MODULES = {"backend.py", "_strict.py", "gradcheck.py", "gradcheck_report.py", "cli.py",
                "data.py", "checkpoint.py", "exercises.py"}


def _imported_modules(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module.split(".")[0]


def test_no_layer_module_imports_numpy_or_cupy():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in HOST_MODULES:
            continue
        found = {name for name in _imported_modules(path) if name in ("numpy", "cupy", "cupyx")}
        if found:
            offenders[path.name] = sorted(found)
    assert not offenders, f"these modules should take xp from minitrans.backend: {offenders}"


def test_the_layout_check_sees_the_layer_modules():
    names = {path.name for path in PACKAGE.glob("*.py")} - HOST_MODULES
    assert {"linear.py", "attention.py", "multihead.py", "layernorm.py"} <= names


def test_every_module_is_short_enough_to_read():
    for path in PACKAGE.rglob("*.py"):
        assert len(path.read_text().splitlines()) <= 300, path.name
