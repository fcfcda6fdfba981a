"""The households inside the library, checked from its source; each check is
also shown catching a planted offender.

* ``training/optimisation/`` (the maths of a step and of a run's course) and
  ``training/run_files/`` (what a run writes and reads back) never import
  each other, nor the modules of ``training/`` that put them together: the
  trainer joins them, they do not lean on it or on each other. Both may
  read the run's settings (``train_config.py``).
* ``files/`` sits just above ``core`` (``test_layout.py``'s levels) and
  holds every reader of a file a user hands us (checkpoints, model
  folders, corpora, tokenizer files). Outside it, a call that opens,
  reads or parses a file is an offender, unless it is listed in
  ``NOT_USER_FILES`` with the reason the file it reads is not a user's.
"""

import ast
import pathlib

from tests.project.conftest import imported_names

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "minitrans"

# A household: (its folder, the folders of the library it may not import).
TRAINING_TOP = "training/*.py"
HOUSEHOLDS = {
    "training/optimisation": ("training/run_files", TRAINING_TOP),
    "training/run_files": ("training/optimisation", TRAINING_TOP),
}
# What both may read: the run's settings, as each may read the model's (model/config.py).
SHARED = {"training/train_config.py"}

# Calls that open, read or parse a file, by the name they are called by.
READING_CALLS = {"open", "fdopen", "read_text", "read_bytes", "ZipFile", "safe_open", "load",
                 "loads", "fromfile", "memmap"}

# Modules outside files/ that read something which is not a user's file.
NOT_USER_FILES = {
    "training/run_files/run_folder.py": "the run's lock, which minitrans itself writes; "
                                        "4 KiB are read at most",
    "cli/environment.py": "the system's /proc/cpuinfo",
    "cli/main.py": "opens /dev/null to silence output, reads nothing",
    "data/vocab.py": "parses a vocabulary's text that files/ has already read and checked",
    "data/bpe.py": "parses the merges' text that files/ has already read and checked",
    "training/optimisation/worker_processes.py": "unpickles an error it pickled itself, to "
                                                 "see that it survives the pipe",
}


def _relative(path):
    return path.relative_to(PACKAGE).as_posix()


def _in(relative, folder):
    """Whether the module at ``relative`` (to the package) is in ``folder``
    ("training/run_files") or matches the pattern "training/*.py" (a
    folder's own modules, not those of its subfolders)."""
    if folder.endswith("/*.py"):
        return relative.rsplit("/", 1)[0] == folder[:-len("/*.py")]
    return relative.startswith(folder + "/")


def _module_file(dotted):
    """The file, relative to the package, of the module a dotted name is in:
    minitrans.training.trainer.Trainer -> training/trainer.py, a package
    -> its __init__.py (None outside minitrans)."""
    parts = dotted.split(".")
    if parts[0] != "minitrans":
        return None
    for end in range(len(parts), 1, -1):
        path = "/".join(parts[1:end])
        if (PACKAGE / path).is_dir():
            return f"{path}/__init__.py"
        if (PACKAGE / f"{path}.py").is_file():
            return f"{path}.py"
    return None


def household_offences(relative, source):
    """The imports of the module at ``relative`` that reach into a folder
    its household may not import."""
    forbidden = next((banned for home, banned in HOUSEHOLDS.items() if _in(relative, home)), ())
    found = set()
    for name in imported_names(source):
        target = _module_file(name)
        if target and target not in SHARED and any(_in(target, f) for f in forbidden):
            found.add(name)
    return sorted(found)


def household_names(tree):
    """The names that ``tree`` imports from ``minitrans.files``: calling
    them is asking the household to read."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("minitrans.files"):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def reading_calls(source):
    """The calls in ``source`` that open, read or parse a file by themselves:
    a call of a function or module imported from minitrans.files is not one,
    nor a call of a function the module defines (its own body is looked at)."""
    tree = ast.parse(source)
    delegated = household_names(tree) | {node.name for node in ast.walk(tree)
                                         if isinstance(node, ast.FunctionDef)}
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Attribute):
            name, base = function.attr, function.value
            if isinstance(base, ast.Name) and base.id in delegated:
                continue
        else:
            name = getattr(function, "id", None)
            if name in delegated:
                continue
        if name in READING_CALLS:
            found.add(ast.unparse(function))
    return sorted(found)


def _modules():
    return {_relative(path): path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


def test_the_optimisation_maths_and_a_runs_files_keep_apart():
    offenders = {name: found for name, source in _modules().items()
                 if (found := household_offences(name, source))}
    assert not offenders, f"imports across the training households: {offenders}"


def test_the_household_check_catches_planted_imports():
    assert household_offences("training/optimisation/adam.py",
                              "from minitrans.training.run_files import checkpoint\n") == [
        "minitrans.training.run_files", "minitrans.training.run_files.checkpoint"]
    assert household_offences("training/run_files/plots.py",
                              "from minitrans.training.trainer import Trainer\n") == [
        "minitrans.training.trainer", "minitrans.training.trainer.Trainer"]
    assert household_offences("training/trainer.py",
                              "from minitrans.training.run_files import checkpoint\n") == []
    assert household_offences("training/optimisation/schedule.py",
                              "from minitrans.core import backend\n") == []
    assert household_offences("training/run_files/records.py",
                              "from minitrans.training.train_config import TrainConfig\n") == []


def test_only_the_files_household_reads_files():
    offenders = {name: found for name, source in _modules().items()
                 if not name.startswith("files/") and name not in NOT_USER_FILES
                 and (found := reading_calls(source))}
    assert not offenders, f"files read outside minitrans/files/: {offenders}"


def test_every_exception_still_reads_a_file():
    # an exception whose reading has moved away would hide the next offender there
    modules = _modules()
    idle = [name for name in NOT_USER_FILES if not reading_calls(modules[name])]
    assert not idle, f"listed in NOT_USER_FILES but reading no file: {idle}"


def test_the_reading_check_catches_planted_reads():
    planted = ("import json, numpy as np, pathlib\n"
               "def f(p):\n"
               "    with open(p) as h:\n"
               "        json.loads(h.read())\n"
               "    np.load(p)\n"
               "    pathlib.Path(p).read_bytes()\n"
               "    return len(p)\n")
    assert reading_calls(planted) == ["json.loads", "np.load", "open", "pathlib.Path(p).read_bytes"]
    assert reading_calls("import os\nos.path.exists('x')\n") == []
    assert reading_calls("from minitrans.files import tsv\ntsv.read_tsv('x')\n"
                         "from minitrans.files.rules import read_text\nread_text('x')\n") == []
    assert reading_calls("def load(p):\n    return p\nload('x')\n") == []
