"""The course tests' helper: an exercise checker shown failing a wrong
answer in the case that shows the mistake (``from tests.course.conftest
import assert_fails_in_case``)."""


def assert_fails_in_case(checker, wrong, case):
    """An exercise checker fails the wrong answer on seeds 0, 1 and 2, naming
    ``case`` as the case that shows the mistake, with a hint."""
    for seed in (0, 1, 2):
        result = checker(wrong, quiet=True, seed=seed)
        assert not result.passed and result.case.startswith(f"case '{case}' ("), result.message
        assert result.message.startswith(f"not yet: {result.case}: "), result.message
        assert "Hint: " in result.message
