"""Which way the imports point, read from the source: no module of
``minitrans`` imports the course kit (``minitrans_course``), and no two
files import each other, directly or round a longer circle, in the library
or anywhere else in the tree (the course kit, the benchmarks, lessons,
examples and tests). Every import counts, a deferred one inside a function
too: it hides a circle, it does not remove it. Each check is also shown
catching a planted offender.

Outside the packages, an import is resolved as the file that runs it would
resolve it: a script's folder is first on sys.path (the suite's scripts,
benchmarks/device/ and benchmarks/dev/ import their neighbours by plain
names), then the repository's packages, then benchmarks/, where the
suite's helpers live as the package ``harness`` (the suite's scripts, the
device check, the dev scripts, lessons and tests all put it on sys.path)."""

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


FOLDERS = ("minitrans", "minitrans_course", "benchmarks", "lessons", "examples", "tests")


def search_roots(path, root):
    """Where an import of the file at ``path`` is looked for, in order."""
    own = [] if (path.parent / "__init__.py").exists() else [path.parent]  # a script's folder
    return own + [root, root / "benchmarks"]


def resolve(name, roots):
    """The file that the dotted module ``name`` is in the first of ``roots``
    that has it (a module or a package's __init__.py), or None."""
    for base in roots:
        candidate = base.joinpath(*name.split("."))
        for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
            if path.is_file():
                return path
    return None


def file_graph(root, folders=FOLDERS):
    """{file: the files it imports}, as paths relative to ``root``, over
    every Python file of ``folders``. A top-level package's __init__.py (of
    minitrans, the course kit, the tests, the harness) is left out as a
    target, as the library's own graph leaves out ``minitrans``: it gathers
    its package's names, and a module that imports one of them from it
    names the package, not a dependency of its own."""
    tops = {root, root / "benchmarks"}
    graph = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            roots = search_roots(path, root)
            targets = {resolve(name, roots) for name in imported_names(path.read_text())}
            graph[path.relative_to(root).as_posix()] = {
                target.relative_to(root).as_posix() for target in targets
                if target is not None and target != path
                and not (target.name == "__init__.py" and target.parent.parent in tops)}
    return graph


def test_no_two_files_of_the_tree_import_each_other():
    graph = file_graph(ROOT)
    assert "benchmarks/harness/report.py" in graph["benchmarks/vs_pytorch.py"]
    assert "benchmarks/device/sections.py" in graph["benchmarks/device/check.py"]
    assert circles(graph) == []


def plant(root, files):
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_tree_check_catches_circles_among_benchmark_modules(tmp_path):
    """The flat layout's two circles (a script and its report module; a
    worker, its runners and back), a circle inside a helper package (one
    import deferred), and a script that imports a circle without being in it."""
    plant(tmp_path, {
        "benchmarks/vs_pytorch.py": "from benchmark_report import report\n",
        "benchmarks/benchmark_report.py": "def cell():\n    from vs_pytorch import CONFIGS\n",
        "benchmarks/benchmark_worker.py": "from llama_runner import LlamaRunner\n",
        "benchmarks/llama_runner.py": "from torch_runner import TorchRunner\n",
        "benchmarks/torch_runner.py": "from benchmark_worker import BATCHES\n",
        "benchmarks/harness/__init__.py": "",
        "benchmarks/harness/a.py": "from harness import b\n",
        "benchmarks/harness/b.py": "def later():\n    from harness.a import x\n",
        "benchmarks/kernels.py": "from harness.a import x\nimport numpy\n",
        "benchmarks/device/check.py": "import runs\n",
        "benchmarks/device/runs.py": "from check import REPO\nfrom harness import a\n",
    })
    assert circles(file_graph(tmp_path, ["benchmarks"])) == [
        ["benchmarks/benchmark_report.py", "benchmarks/vs_pytorch.py"],
        ["benchmarks/benchmark_worker.py", "benchmarks/llama_runner.py",
         "benchmarks/torch_runner.py"],
        ["benchmarks/device/check.py", "benchmarks/device/runs.py"],
        ["benchmarks/harness/a.py", "benchmarks/harness/b.py"],
    ]
    plant(tmp_path, {"benchmarks/harness/b.py": "X = 1\n", "benchmarks/device/runs.py": "",
                     "benchmarks/benchmark_report.py": "", "benchmarks/torch_runner.py": ""})
    assert circles(file_graph(tmp_path, ["benchmarks"])) == []


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
