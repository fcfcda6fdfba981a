"""The README says that without PyTorch (``pip install ".[dev]"``) the
parity tests are skipped, with the reason, and the rest of the suite passes
(a glossary test that looks up ``to_torch`` once failed there: only an import
of torch made that name visible).

This runs the test files that name PyTorch in a process where ``import
torch`` fails as it does where torch is not installed, and wants every test
to pass or to skip, never to fail. The lessons, examples and benchmarks
that need PyTorch decide with the same ``find_spec("torch")`` that this
process answers with "absent"; they are left out here only for their time.
"""

import pathlib
import subprocess
import sys

import pytest

TESTS = pathlib.Path(__file__).resolve().parents[1]
SLOW = {"test_lessons.py", "test_examples.py", "test_device_check.py", "test_benchmarks.py",
        "test_without_torch.py"}
# sys.modules[name] = None: "import name" raises ImportError, find_spec says None
RUN_WITHOUT_TORCH = (
    "import sys; sys.modules.update(torch=None, transformers=None); import pytest; "
    "sys.exit(pytest.main(sys.argv[1:]))"
)


def files_that_name_torch():
    return sorted(path.relative_to(TESTS).as_posix() for path in TESTS.glob("*/test_*.py")
            if "torch" in path.read_text(encoding="utf-8") and path.name not in SLOW)


def run_without_torch(*arguments):
    return subprocess.run([sys.executable, "-c", RUN_WITHOUT_TORCH, "-q", "-p", "no:cacheprovider",
                           "-rs", *arguments], cwd=TESTS.parent, capture_output=True, text=True,
                          timeout=600)


def test_the_files_that_name_torch_pass_or_skip_without_it():
    files = files_that_name_torch()
    assert "course/test_glossary.py" in files and "library/test_torch_parity.py" in files
    result = run_without_torch(*(f"tests/{name}" for name in files))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "PyTorch is not installed" in result.stdout  # the parity tests say why they skip


def test_the_check_fails_where_a_test_needs_torch(tmp_path):
    """A test that imports torch without a skip fails in that process."""
    needs = tmp_path / "test_needs_torch.py"
    needs.write_text("def test_it():\n    import torch\n", encoding="utf-8")
    result = run_without_torch(str(needs))
    assert result.returncode == 1 and "ModuleNotFoundError" in result.stdout


@pytest.mark.parametrize("name", ["torch", "transformers"])
def test_the_process_hides_the_references(name):
    probe = f"import importlib.util; print(importlib.util.find_spec({name!r}))"
    command = RUN_WITHOUT_TORCH.replace("import pytest; sys.exit(pytest.main(sys.argv[1:]))", probe)
    result = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True)
    assert result.stdout.strip() == "None", result.stderr
