"""The suite's results files and the README's latest tables: every results
file is named by its time and commit and begins with the date, machine,
commit and command; the shared writer writes exactly that and never over
an existing file; and benchmarks/README.md shows, for each suite script,
the first table of its newest results file. Each check is also shown
failing on a planted wrong file or table."""

import datetime
import pathlib
import re
import subprocess
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from harness import latest, results  # noqa: E402

SUITE = ["task_targets", "ablations", "modern_ablation", "own_data", "vs_pytorch", "kernels",
         "text_lm"]
HEADER = re.compile(r"# .+\n\n- Date: \d{4}-\d\d-\d\d.*\n- Machine: .+\n"
                    r"- Commit: ([0-9a-f]{7}|unknown).*\n- Command: `.+`\n\n")
# The device check's reports from before the shared header: their first
# paragraph names the date and the commit, as the device wrote them.
DEVICE_REPORT = re.compile(r"# minitrans device check: .+\n\n\d{4}-\d\d-\d\d \d\d:\d\d UTC, "
                           r"commit [0-9a-f]{7}")
WHEN = datetime.datetime(2026, 11, 27, 14, 5, 9, tzinfo=datetime.timezone.utc)


def header_problems(path):
    """What is wrong with the results file at ``path`` (empty: nothing)."""
    text = path.read_text(encoding="utf-8")
    found = HEADER.match(text) or DEVICE_REPORT.match(text)
    problems = [] if found else ["does not begin with the header"]
    if not latest.RUN_NAME.fullmatch(path.name):
        return problems + ["is not named YYYY-MM-DD-HHMMSS-<commit>.md"]
    commit = path.name.split("-")[-1][:-3]
    if found and found.re is HEADER and found.group(1) != commit:
        problems.append(f"names commit {found.group(1)}, its name {commit}")
    return problems


def test_every_results_file_is_named_and_begins_as_agreed():
    files = sorted(path for path in (BENCHMARKS / "results").glob("*/*")
                   if path.suffix == ".md")
    assert len(files) > 40 and {path.parent.name for path in files} >= {*SUITE, "device_check"}
    wrong = {path.relative_to(BENCHMARKS).as_posix(): problems for path in files
             if (problems := header_problems(path))}
    assert not wrong, wrong


def test_the_header_check_sees_a_planted_wrong_file(tmp_path):
    good = results.write_run(tmp_path, "A title", "| a |\n", "a machine", "python x.py",
                             when=WHEN, commit="abc1234")
    assert header_problems(good) == []
    bad = tmp_path / "2026-11-27-140510-abc1234.md"
    bad.write_text(good.read_text().replace("- Commit: abc1234\n", ""), encoding="utf-8")
    assert header_problems(bad) == ["does not begin with the header"]
    other = tmp_path / "2026-11-27-140511-1234567.md"
    other.write_text(good.read_text(), encoding="utf-8")
    assert header_problems(other) == ["names commit abc1234, its name 1234567"]
    unnamed = tmp_path / "results.md"
    unnamed.write_text(good.read_text(), encoding="utf-8")
    assert header_problems(unnamed) == ["is not named YYYY-MM-DD-HHMMSS-<commit>.md"]


def test_the_writer_names_the_file_by_time_and_commit_and_never_overwrites(tmp_path):
    path = results.write_run(tmp_path / "new", "Task targets", "| task |\n| --- |\n",
                             "Some CPU, 2 cores", "python benchmarks/task_targets.py",
                             when=WHEN, commit="abc1234 + uncommitted changes")
    assert path == tmp_path / "new" / "2026-11-27-140509-abc1234.md"
    assert path.read_text(encoding="utf-8") == (
        "# Task targets\n\n- Date: 2026-11-27 14:05:09 UTC\n- Machine: Some CPU, 2 cores\n"
        "- Commit: abc1234 + uncommitted changes\n"
        "- Command: `python benchmarks/task_targets.py`\n\n| task |\n| --- |\n")
    with pytest.raises(FileExistsError):
        results.write_run(tmp_path / "new", "Again", "", "x", "y", when=WHEN, commit="abc1234")
    assert results.file_name(WHEN, "unknown (no git)") == "2026-11-27-140509-unknown.md"


def test_the_commit_is_the_stated_one_over_git_and_the_command_is_relative(tmp_path):
    assert results.git_commit(environ={"MINITRANS_COMMIT": "8bd1e9d"}) == (
        "8bd1e9d (MINITRANS_COMMIT)")
    assert re.fullmatch(r"[0-9a-f]{7}( \+ uncommitted changes)?|unknown \(no git\)",
                        results.git_commit(environ={}))
    assert results.git_commit(tmp_path, environ={}) == "unknown (no git)"  # not a checkout
    script = str(BENCHMARKS / "kernels.py")
    assert results.command_line([script, "--kernels", "sum_last", "--configs", "a b"]) == (
        "python benchmarks/kernels.py --kernels sum_last --configs 'a b'")


def test_a_smoke_run_writes_no_results_file_unless_given_a_folder(tmp_path):
    assert results.folder_for(None, "kernels") == results.RESULTS / "kernels"
    assert results.folder_for(None, "kernels", smoke=True) is None
    assert results.folder_for(str(tmp_path), "kernels", smoke=True) == tmp_path


def test_the_readme_shows_the_newest_table_of_every_suite_script():
    text = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    assert [match.group("stem") for match in latest.BLOCK.finditer(text)] == SUITE
    assert latest.stale_blocks(text) == [], "run python benchmarks/harness/latest.py"
    assert len(text.splitlines()) <= 200


def plant_runs(folder, tables):
    """A results folder with one file per table, in order of time."""
    for second, table in enumerate(tables):
        when = WHEN + datetime.timedelta(seconds=second)
        results.write_run(folder / "kernels", "Kernels", f"{table}\n\nprose\n\n| other |\n",
                          "m", "c", when=when, commit="abc1234")


def test_a_table_that_differs_from_the_newest_file_is_caught(tmp_path):
    plant_runs(tmp_path, ["| old |\n| --- |", "| new |\n| --- |"])
    fresh = latest.refreshed("intro\n<!-- latest: kernels -->\n<!-- end latest -->\n", tmp_path)
    assert "| new |\n| --- |\n<!-- end latest -->" in fresh and "| old |" not in fresh
    assert "(results/kernels/2026-11-27-140510-abc1234.md)" in fresh
    assert latest.stale_blocks(fresh, tmp_path) == []
    assert latest.stale_blocks(fresh.replace("| new |", "| edited |"), tmp_path) == ["kernels"]
    plant_runs(tmp_path / "later", ["| newer |\n| --- |"])  # a run newer than the README's
    (tmp_path / "later" / "kernels" / "2026-11-27-140509-abc1234.md").rename(
        tmp_path / "kernels" / "2026-11-27-140511-abc1234.md")
    assert latest.stale_blocks(fresh, tmp_path) == ["kernels"]
    assert "| newer |" in latest.refreshed(fresh, tmp_path)


def test_the_refresh_command_checks_the_readme():
    run = subprocess.run([sys.executable, str(BENCHMARKS / "harness" / "latest.py"), "--check"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stderr == "", run.stderr
