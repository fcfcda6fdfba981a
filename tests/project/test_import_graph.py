"""Which way the library's imports point, read from its source: no module
of ``minitrans`` imports the course kit (``minitrans_course``), and no two
modules import each other, directly or round a longer circle. Every import
counts, a deferred one inside a function too: it hides a circle, it does not
remove it. Each check is also shown catching a planted offender."""

import pathlib
import subprocess
import sys

from tests.project.conftest import imported_names

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "minitrans"
COURSE_PACKAGE = "minitrans_course"


def module_name(path):
    """minitrans/core/backend.py -> minitrans.core.backend; a package's
    __init__.py is the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def library_modules():
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def import_graph(sources):
    """{module: the modules among ``sources`` that it imports}. The top-level
    package ``minitrans`` is left out: its __init__ gathers the public API
    from every subpackage, and no module imports it for its own use."""
    known = set(sources)
    return {
        name: {target for target in imported_names(source)
               if target in known and target != name and target != "minitrans"}
        for name, source in sources.items() if name != "minitrans"
    }


def circles(graph):
    """The strongly connected components of more than one module (Tarjan's
    algorithm): each is a set of modules that import each other round a circle."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def course_imports(source):
    return sorted({name for name in imported_names(source)
                   if name.split(".")[0] == COURSE_PACKAGE})


def test_no_two_library_modules_import_each_other():
    sources = {name: path.read_text() for name, path in library_modules().items()}
    assert circles(import_graph(sources)) == []


def test_the_circle_check_catches_planted_circles():
    planted = {
        "minitrans.a": "from minitrans import b\n",
        "minitrans.b": "def later():\n    from minitrans.c import thing\n",  # deferred
        "minitrans.c": "import minitrans.a\n",
        "minitrans.d": "from minitrans.a import x\n",  # imports the circle, is not in it
    }
    assert circles(import_graph(planted)) == [["minitrans.a", "minitrans.b", "minitrans.c"]]
    assert circles(import_graph({"minitrans.a": "", "minitrans.b": "import minitrans.a"})) == []


def test_the_library_never_imports_its_course():
    offenders = {name: found for name, path in library_modules().items()
                 if (found := course_imports(path.read_text()))}
    assert not offenders, f"library modules importing the course kit: {offenders}"


def test_the_course_check_catches_a_planted_import():
    planted = "def figure():\n    from minitrans_course.diagrams import draw_architecture\n"
    assert course_imports(planted) == ["minitrans_course.diagrams",
                                       "minitrans_course.diagrams.draw_architecture"]
    assert course_imports("import minitrans.gradcheck\n") == []


def test_importing_every_library_module_loads_nothing_of_the_course():
    """The same rule at run time: import every module of minitrans (those
    that need PyTorch where it is installed) and look at what was loaded."""
    script = (
        "import importlib, pkgutil, sys\n"
        "import minitrans\n"
        "for info in pkgutil.walk_packages(minitrans.__path__, 'minitrans.'):\n"
        "    if info.name == 'minitrans.__main__':\n"  # it runs the command line
        "        continue\n"
        "    try:\n"
        "        importlib.import_module(info.name)\n"
        "    except ImportError as error:\n"
        "        if error.name != 'torch':\n"
        "            raise\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'minitrans_course'))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=ROOT, check=True)
    assert result.stdout.strip() == "[]"
