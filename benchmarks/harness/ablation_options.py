"""What ablations.py and modern_ablation.py share: the stored JSON results
that lessons 18 and 22 read, the line that says where they were measured,
and the option type of their counts."""

import datetime
import json
import os

from harness import machine


def json_path(out, force, default):
    """The JSON results path for ``--out``. The default path holds the stored
    results that a lesson reads, always rewritten (its folder made); any
    other path only with ``force`` where it exists, and in a folder that
    exists. ValueError naming ``out`` otherwise."""
    path = os.path.abspath(out or default)
    if not path.endswith(".json"):
        raise ValueError(f"out: expected a path ending in .json, got {out}")
    if path != default and os.path.exists(path) and not force:
        raise ValueError(f"out: {path} exists; expected a new file (or --force)")
    if path != default and not os.path.isdir(os.path.dirname(path)):
        raise ValueError(f"out: expected an existing folder, got {os.path.dirname(path)}")
    return path


def load_average():
    """The 1-minute load average (how many programs wanted a core), as text:
    above the core count, the runs shared their cores."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except (AttributeError, OSError):  # not on Windows
        return "unknown"


def measured_line(total, load_before):
    """The stored results' "machine" line: the date, the machine, the
    seconds in all and the load average at both ends."""
    return (f"Measured {datetime.date.today().isoformat()} on {machine.summary()}; "
            f"{total:.0f} s in all; load average {load_before} at the start, "
            f"{load_average()} at the end (programs sharing the cores change the seconds, not "
            f"the other numbers)")


def write_json(path, stored):
    """Write the stored results (a dict) to ``path``, its folder made."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(stored, file, indent=1)


def positive(text):
    """argparse type: an int >= 1 (argparse names the flag in its message)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


positive.__name__ = "int >= 1"  # argparse's message: "invalid int >= 1 value: '0'"
