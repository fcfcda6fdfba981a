"""The course's bilingual glossary, lessons/glossary.md.

The glossary is one Markdown table: English term, 中文, meaning, lessons (links
to NN_name.ipynb), minitrans name. These tests read it as a table and check
what a reader relies on: every cell filled, Chinese really in Chinese, every
lesson link leading to a lesson, every minitrans name existing in the package,
no term twice, at least 60 terms, and every lesson taught by some term. Each
check is also shown failing on a planted bad row."""

import ast
import functools
import html
import importlib.util
import pathlib
import pkgutil
import re

import minitrans
import minitrans_course

LESSONS = pathlib.Path(__file__).resolve().parents[2] / "lessons"
GLOSSARY = LESSONS / "glossary.md"
COLUMNS = ["English", "中文", "meaning", "lessons", "in minitrans"]
LESSON_LINK = re.compile(r"\[[^\]]*\]\((\d\d_\w+)\.ipynb\)")
CJK = re.compile(r"[\u4e00-\u9fff]")
NO_NAME = "—"


def table_rows(text):
    """The table's rows as lists of cells, stripped, without the header and the
    ``| --- |`` rule; ``\\|`` inside a cell is a literal bar, and HTML entities
    (``&lt;pad&gt;``) are read as the characters they stand for."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert len(lines) >= 2, "the glossary has no table"
    header = split_row(lines[0])
    assert header == COLUMNS, f"the table's columns are {header}, not {COLUMNS}"
    assert set(lines[1].replace("|", "").split()) == {"---"}, "no '| --- |' rule under the header"
    return [split_row(line) for line in lines[2:]]


def split_row(line):
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [html.unescape(cell.replace("\\|", "|")).strip() for cell in cells]


@functools.lru_cache(maxsize=None)
def defined_names():
    """Every name the modules of minitrans and of its course kit
    (``minitrans_course``: the exercises' references, lesson 0's convolution
    and path lengths, the figures) define, read from their source
    (``ast``), not imported: ``minitrans.interop`` needs PyTorch, which a
    learner who installed ".[dev]" does not have, and its names are in the
    glossary all the same. Top-level functions, classes and assignments as
    "name", and what a class defines as "Class.name"."""
    names = set()
    packages = [(minitrans, "minitrans."), (minitrans_course, "minitrans_course.")]
    modules = [info.name for package, prefix in packages
               for info in pkgutil.walk_packages(package.__path__, prefix)]
    for module in modules:
        source = importlib.util.find_spec(module).origin
        tree = ast.parse(pathlib.Path(source).read_text(encoding="utf-8"))
        for node in tree.body:
            names.update(own_names(node))
            if isinstance(node, ast.ClassDef):
                names.update(f"{node.name}.{name}" for child in node.body
                             for name in own_names(child))
    return names


def own_names(node):
    """The names a statement of a module or class body defines."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [name.id for target in targets for name in ast.walk(target)
                if isinstance(name, ast.Name)]
    return []


def name_exists(name):
    """``Name`` or ``Class.attribute`` is defined in some module of minitrans."""
    return name in defined_names()


def row_problems(row):
    """What is wrong with one row, as readable sentences (empty when nothing)."""
    if len(row) != len(COLUMNS):
        return [f"{row[:1]}: {len(row)} cells, not {len(COLUMNS)}"]
    term, chinese, meaning, lessons, name = row
    problems = [f"{term!r}: empty {column}" for column, cell in zip(COLUMNS, row) if not cell]
    if chinese and not CJK.search(chinese):
        problems.append(f"{term!r}: no Chinese characters in {chinese!r}")
    stems = LESSON_LINK.findall(lessons)
    if lessons and not stems:
        problems.append(f"{term!r}: no link to a lesson in {lessons!r}")
    for stem in stems:
        if not (LESSONS / f"{stem}.ipynb").exists():
            problems.append(f"{term!r}: links {stem}.ipynb, which is no lesson")
    if name and name != NO_NAME:
        code = re.fullmatch(r"`([A-Za-z_][\w.]*)`", name)
        if not code:
            problems.append(f"{term!r}: the minitrans name {name!r} is not one `name`")
        elif not name_exists(code.group(1)):
            problems.append(f"{term!r}: minitrans has no {code.group(1)}")
    return problems


def glossary_problems(text):
    """Every problem of a whole glossary: its rows', repeated terms, too few
    terms, lessons that no term links."""
    rows = table_rows(text)
    problems = [problem for row in rows for problem in row_problems(row)]
    terms = [row[0].lower() for row in rows]
    problems += [
        f"{term!r} appears twice" for term in sorted({t for t in terms if terms.count(t) > 1})
    ]
    if len(rows) < 60:
        problems.append(f"only {len(rows)} terms, not at least 60")
    linked = {stem for row in rows if len(row) > 3 for stem in LESSON_LINK.findall(row[3])}
    lessons = {p.stem for p in LESSONS.glob("[0-9][0-9]_*.ipynb")}
    problems += [f"no term links {stem}" for stem in sorted(lessons - linked)]
    return problems


TEXT = GLOSSARY.read_text(encoding="utf-8")


def test_the_glossary_has_no_problem():
    assert glossary_problems(TEXT) == []


def test_the_terms_are_in_alphabetical_order():
    terms = [row[0].lstrip("<").lower() for row in table_rows(TEXT)]
    assert terms == sorted(terms)


def planted(row):
    """The glossary with one more row, ``row`` being its Markdown line."""
    return TEXT.rstrip("\n") + "\n" + row + "\n"


def test_a_row_without_chinese_is_caught():
    bad = planted(
        "| zebra | zebra | A planted term. | [5](05_scaled_dot_product_attention.ipynb) | — |"
    )
    assert glossary_problems(bad) == ["'zebra': no Chinese characters in 'zebra'"]
    empty = planted(
        "| zebra |  | A planted term. | [5](05_scaled_dot_product_attention.ipynb) | — |"
    )
    assert glossary_problems(empty) == ["'zebra': empty 中文"]


def test_a_link_to_a_missing_lesson_is_caught():
    bad = planted("| zebra | 斑马 | A planted term. | [19](19_zebras.ipynb) | — |")
    assert glossary_problems(bad) == ["'zebra': links 19_zebras.ipynb, which is no lesson"]


def test_a_name_minitrans_lacks_is_caught():
    bad = planted(
        "| zebra | 斑马 | A planted term. | [7](07_multi_head_attention.ipynb) | `Zebra` |"
    )
    assert glossary_problems(bad) == ["'zebra': minitrans has no Zebra"]
    method = planted(
        "| zebra | 斑马 | A planted term. | [7](07_multi_head_attention.ipynb) "
        "| `Transformer.gallop` |"
    )
    assert glossary_problems(method) == ["'zebra': minitrans has no Transformer.gallop"]


def test_a_repeated_term_and_an_unlinked_lesson_are_caught():
    twice = planted("| Softmax | 软最大 | Again. | [2](02_softmax_and_similarity.ipynb) | — |")
    assert glossary_problems(twice) == ["'softmax' appears twice"]
    rows = [line for line in TEXT.splitlines() if line.startswith("|")]
    without_20 = "\n".join(line for line in rows if "20_checking" not in line)
    assert "no term links 20_checking_against_pytorch" in glossary_problems(without_20)
    assert not any("only" in p for p in glossary_problems(without_20))


def test_label_smoothing_is_described_as_the_loss_computes_it():
    """The correct token's target is 1 − ε + ε/V, not 1 − ε: the loss spreads ε
    over all V tokens, the correct one and <pad> included, and leaves padded
    positions out of the mean."""
    import numpy as np

    from minitrans.layers.loss import LabelSmoothedCrossEntropy, smoothed_targets

    eps, vocab, pad = 0.1, 5, 0
    targets = np.array([[3, 1, pad]])
    q = np.asarray(smoothed_targets(targets, vocab, eps, np.float64))
    assert np.allclose(q[0, 0, 3], 1 - eps + eps / vocab) and np.allclose(q[0, 0, pad], eps / vocab)
    logits = np.random.default_rng(0).standard_normal((1, 3, vocab))
    loss = LabelSmoothedCrossEntropy(eps, pad_id=pad).forward(logits, targets)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    real = -(q * log_p).sum(-1)[0, :2].mean()  # the padded position left out
    assert np.isclose(float(loss), real)
    (row,) = [row for row in table_rows(TEXT) if row[0] == "label smoothing"]
    assert "1 − ε + ε/V" in row[2] and "every other token ε/V" in row[2]
    assert "padding are left out" in row[2]
