"""Project rules that are checked, not just hoped for: which modules may use
NumPy themselves, which way imports point (never from the library into its
course, never in a circle), and how long a module and a line may be. Each
rule is also shown catching a planted offender."""

import ast
import pathlib

import pytest

from tests.project.conftest import imported_names

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "minitrans"
COURSE = ROOT / "minitrans_course"

# The subpackages in the order of the data's path: a module may import from
# its own subpackage and from those before it, never from one after it.
LEVELS = ["core", "files", "ops", "layers", "model", "data", "decoding", "training", "pretrained",
          "gradcheck", "interop", "cli"]

# Host-side modules that may use NumPy themselves: the backend that chooses
# the library, the strict test backend built on it (and its list of what CuPy
# does otherwise), the checker, the data and
# checkpoint and safetensors code, which work on host copies of arrays
# (padding token ids, reading and writing files), and the two places that
# turn a pretrained tokenizer's ids (Python lists) into arrays: the
# fine-tuning corpus's blocks and generate's prompts. The course kit
# (minitrans_course) is not held to this rule: its exercise checkers hand
# learners plain NumPy arrays.
HOST_MODULES = {"core/backend.py", "core/strict.py", "core/cupy_differences.py", "data/batches.py",
                "data/text_corpus.py", "files/token_file.py",
                "training/run_files/checkpoint.py", "files/checkpoint_file.py",
                "files/safetensors_file.py", "training/finetune.py", "cli/generate.py",
                "training/optimisation/shared_arrays.py"}
HOST_PREFIXES = ("gradcheck/",)  # the checker works on host copies, in float64
MAX_MODULE_LINES = 300
MAX_LINE_LENGTH = 100


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def _relative(path):
    return path.relative_to(PACKAGE).as_posix()


def _level(dotted):
    """The level of a minitrans module (None for the package's top level or
    for anything outside minitrans)."""
    parts = dotted.split(".")
    if parts[0] != "minitrans" or len(parts) < 2 or parts[1] not in LEVELS:
        return None
    return LEVELS.index(parts[1])


def wrong_way_imports(relative_path, source):
    """The imports of a module (path relative to the package) that point
    up: into a subpackage after its own."""
    parts = relative_path.split("/")
    if len(parts) < 2:  # minitrans/__init__.py gathers the public API from all of them
        return []
    own = LEVELS.index(parts[0])
    return sorted({name for name in imported_names(source)
                   if _level(name) is not None and _level(name) > own})


def private_names_imported(source):
    """``from minitrans... import _name``: a private helper used outside its module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("minitrans"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


def private_attributes_reached(source):
    """``Name._helper`` where ``Name`` came from an import of minitrans (a
    module, a class or a function of another module): a private helper
    reached from outside its module. ``self._x`` and ``__dunder__`` pass."""
    tree = ast.parse(source)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (
            (node.module or "").startswith("minitrans") or node.level > 0
        ):
            imported |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            imported |= {(alias.asname or alias.name).split(".")[0] for alias in node.names
                         if alias.name.split(".")[0] == "minitrans"}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):  # minitrans.core.backend._state
                base = base.value
            if isinstance(base, ast.Name) and base.id in imported:
                found.add(ast.unparse(node))
    return sorted(found)


def _is_private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _sources_of_the_package_and_its_readers():
    """The package's modules, and the tests, lessons, examples and benchmarks
    that use it: none of them may lean on another module's private names."""
    sources = {_relative(p): p.read_text() for p in _modules()}
    for folder in ("tests", "lessons", "examples", "benchmarks"):
        sources.update({p.relative_to(ROOT).as_posix(): p.read_text()
                        for p in sorted((ROOT / folder).rglob("*.py"))})
    return sources


def test_every_module_sits_in_a_subpackage_of_the_layout():
    for path in _modules():
        parts = _relative(path).split("/")
        if len(parts) == 1:
            assert parts[0] in ("__init__.py", "__main__.py"), parts[0]
        else:
            assert parts[0] in LEVELS, _relative(path)


def test_imports_point_one_way():
    offenders = {}
    for path in _modules():
        wrong = wrong_way_imports(_relative(path), path.read_text())
        if wrong:
            offenders[_relative(path)] = wrong
    assert not offenders, f"these modules import from a later subpackage: {offenders}"


def test_the_direction_check_catches_an_upward_import():
    assert wrong_way_imports("layers/linear.py", "from minitrans.model import transformer\n") == [
        "minitrans.model", "minitrans.model.transformer"]
    assert wrong_way_imports("ops/softmax.py", "import minitrans.layers.linear\n") == [
        "minitrans.layers.linear"]
    assert wrong_way_imports("model/encoder.py", "from minitrans.layers import linear\n") == []


def test_no_private_helper_is_imported_across_modules():
    sources = _sources_of_the_package_and_its_readers()
    offenders = {name: found for name, source in sources.items()
                 if (found := private_names_imported(source))}
    assert not offenders, f"private names imported from another module: {offenders}"
    assert private_names_imported("from minitrans.ops.softmax import _row_max\n") == [
        "minitrans.ops.softmax._row_max"]


def test_no_private_helper_is_reached_across_modules():
    offenders = {name: found for name, source in _sources_of_the_package_and_its_readers().items()
                 if (found := private_attributes_reached(source))}
    assert not offenders, f"private names reached through another module: {offenders}"


PLANTED = """
import minitrans.core.backend
from minitrans.core import backend
from minitrans.model.transformer import Transformer as T

class LM:
    def forward(self, ids):
        T._check_ids(ids)  # caught: a class imported from another module
        backend._state.update(name="numpy")  # caught: an imported module
        minitrans.core.backend._load("numpy")  # caught: reached from the package
        self._cache = T.__name__, backend.get_xp()  # passes: own attribute, dunder, public
"""


def test_the_private_attribute_check_catches_planted_ones():
    assert private_attributes_reached(PLANTED) == [
        "T._check_ids", "backend._state", "minitrans.core.backend._load"]
    assert private_attributes_reached("import numpy as np\nnp._NoValue\n") == []


def test_no_layer_module_imports_numpy_or_cupy():
    offenders = {}
    for path in _modules():
        if _relative(path) in HOST_MODULES or _relative(path).startswith(HOST_PREFIXES):
            continue
        found = {name.split(".")[0] for name in imported_names(path.read_text())} & {
            "numpy", "cupy", "cupyx"}
        if found:
            offenders[_relative(path)] = sorted(found)
    assert not offenders, f"these modules should take xp from minitrans.core.backend: {offenders}"


def test_the_host_module_list_names_real_modules():
    assert HOST_MODULES <= {_relative(p) for p in _modules()}


@pytest.mark.parametrize("folder", ["minitrans", "minitrans_course", "tests", "benchmarks",
                                    "examples", "lessons"])
def test_every_line_is_at_most_100_characters(folder):
    # A Markdown table row in a lesson ("# | ... |") cannot be wrapped onto a second line
    # without breaking the table, so it is the one kind of line allowed to be longer.
    long_lines = [f"{path.relative_to(ROOT)}:{number}"
                  for path in sorted((ROOT / folder).rglob("*.py"))
                  for number, line in enumerate(path.read_text().splitlines(), start=1)
                  if len(line) > MAX_LINE_LENGTH and not line.startswith("# |")]
    assert not long_lines, f"lines longer than {MAX_LINE_LENGTH} characters: {long_lines}"


def test_every_module_is_short_enough_to_read():
    too_long = {p.relative_to(ROOT).as_posix(): n
                for p in [*_modules(), *sorted(COURSE.rglob("*.py"))]
                if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"
