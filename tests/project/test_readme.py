"""The READMEs and the guide stay true to the code: every file they name exists, every
import in their Python examples works, and the top README's examples run."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The READMEs and the user guide's pages, which show the same kind of paths and examples.
READMES = ["README.md", "benchmarks/README.md", "benchmarks/dev/README.md", "lessons/README.md",
           *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "lessons/guide").glob("*.md"))]
PATH_IN_BACKTICKS = re.compile(r"`((?:minitrans|tests|benchmarks|examples|lessons)/[\w/.-]*)`")
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def named_paths(text):
    """Paths such as `minitrans/layers/linear.py` written in backticks."""
    return sorted(set(PATH_IN_BACKTICKS.findall(text)))


def import_lines(text):
    """The import statements of the ```python blocks."""
    lines = []
    for block in PYTHON_BLOCK.findall(text):
        lines += [line.split("#")[0].strip() for line in block.splitlines()
                  if re.match(r"\s*(from minitrans[\w.]* import|import minitrans)", line)]
    return lines


@pytest.mark.parametrize("readme", READMES)
def test_every_named_file_exists(readme):
    missing = [path for path in named_paths((ROOT / readme).read_text())
               if not (ROOT / path.rstrip("/")).exists()]
    assert not missing, f"{readme} names files that do not exist: {missing}"


def test_the_path_check_sees_a_missing_file():
    assert named_paths("see `minitrans/layers/linear.py` and `minitrans/nowhere.py`") == [
        "minitrans/layers/linear.py", "minitrans/nowhere.py"]
    assert not (ROOT / "minitrans/nowhere.py").exists()


@pytest.mark.parametrize("readme", READMES)
def test_every_import_in_an_example_works(readme):
    for line in import_lines((ROOT / readme).read_text()):
        if "torch" in line:
            pytest.importorskip("torch")
        exec(line, {})  # raises ImportError if a module or name has moved


def test_every_python_example_of_the_readme_runs():
    blocks = PYTHON_BLOCK.findall((ROOT / "README.md").read_text())
    assert blocks, "the README shows no Python"
    for block in blocks:
        exec(block, {"print": lambda *args: None})
