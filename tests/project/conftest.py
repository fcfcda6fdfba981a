"""The project tests' helper: the modules a source file imports, read from
its syntax tree (``from tests.project.conftest import imported_names``)."""

import ast


def imported_names(source):
    """Every module an import statement of ``source`` names, as dotted names,
    deferred imports inside functions too: ``from minitrans.core import
    backend`` gives both minitrans.core and minitrans.core.backend (the last
    name may be a module or a name defined in one)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
