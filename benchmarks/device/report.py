"""The device check's report: one Markdown file, the machine, the targets
and a table of every section first, then a part per section with its command, key
numbers, details and the end of its output in a collapsible block."""

STATUS_TEXT = {"passed": "passed", "FAILED": "**FAILED**", "skipped": "skipped"}
SUMMARY_WIDTH = 140  # characters of a section's first key number in the summary table


def render(title, facts, sections, results, targets=""):
    """The whole report. ``facts``: lines under the title; ``sections``: the
    Section tuples in order; ``results``: {key: Result} of those that ran
    (or were skipped) so far: the others show as not reached; ``targets``:
    the targets table (Markdown), first after the facts."""
    lines = [f"# {title}", ""] + [line for fact in facts for line in (fact, "")]
    lines += [targets, ""] if targets else []
    lines += [summary_table(sections, results), ""]
    for number, section in enumerate(sections, 1):
        lines += section_part(number, section, results.get(section.key))
    return "\n".join(lines).rstrip("\n") + "\n"


def summary_table(sections, results):
    lines = ["| # | section | status | wall time (limit) | key numbers |",
             "| --- | --- | --- | --- | --- |"]
    for number, section in enumerate(sections, 1):
        result = results.get(section.key)
        status, timing, first = "not reached", "", ""
        if result is not None:
            status = STATUS_TEXT[result.status] + (f": {result.why}" if result.why else "")
            timing = f"{result.seconds:.0f} s ({result.limit:.0f} s)" if result.limit else ""
            first = result.numbers[0] if result.numbers else ""
        cells = [str(number), section.title, status, timing, _shortened(first)]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return "\n".join(lines)


def section_part(number, section, result):
    """The lines of one section's part of the report."""
    lines = [f"## {number}. {section.title}", ""]
    if result is None:
        return lines + ["Not reached: the check stopped before this section.", ""]
    status = STATUS_TEXT[result.status] + (f": {result.why}" if result.why else "")
    lines += [f"Status: {status}", ""]
    if result.limit:
        lines += [f"Wall time: {result.seconds:.1f} s of its limit of {result.limit:.0f} s", ""]
    if result.command:
        lines += [f"Command: `python {result.command}`", ""]
    lines += [f"- {number_line}" for number_line in result.numbers]
    lines += [""] if result.numbers else []
    lines += [result.details, ""] if result.details else []
    if result.output:
        lines += collapsible(result.output_label, result.output)
    return lines


def collapsible(label, text):
    """A <details> block holding ``text`` verbatim (a four-backtick fence,
    so that a fence of three inside it cannot end it)."""
    return ["<details>", f"<summary>{label}</summary>", "", "````text", text.rstrip("\n"),
            "````", "", "</details>", ""]


def _shortened(text):
    return text if len(text) <= SUMMARY_WIDTH else text[:SUMMARY_WIDTH - 3] + "..."
