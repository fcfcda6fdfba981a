"""The device check's targets: what the GPU work must show, each beside
the number the check measured and whether it is met.

The sections put what they measured into one dict (``context["measured"]``
in ``check.py``); ``table(measured)`` turns it into the table at the top of
the report. A target whose section did not run, or ran without the
number, is "not measured": never met by default.

    steps     {config: (minitrans seconds, PyTorch seconds)}, a median step each
    memory    {config: (minitrans bytes, PyTorch bytes)}, the device's peak held
    skipped   {config: why vs_pytorch could not run it}
    train     {"gpu": seconds, "cpu": seconds, "cpu_reached": bool} to 100% exact match
    decoding  {"cached", "recomputed", "torch"}: seconds of greedy decoding, best of runs
    launches  {"step", "token", "step_budget", "token_budget"}: counted on the host
    fused     {"passed": pair names, "failed": pair names}: fused = reference on the device
    text      {"steps": (minitrans s, PyTorch s), a median step each, "held_out":
              (minitrans loss, PyTorch loss), "gap_allowed": nats}: nanoGPT's GPU recipe
"""

CONFIGS = ("tiny", "small", "base", "copy", "llama")
# minitrans's step over PyTorch CUDA eager's: at most this for each config
STEP_RATIO_TARGETS = {"tiny": 0.7, "small": 0.7, "base": 1.0, "copy": 1.0, "llama": 1.0}
CACHE_SPEEDUP_TARGET = 3.0  # decoding with the cache against minitrans recomputing
MET, NOT_MET, NOT_MEASURED = "met", "**not met**", "not measured"


def verdict(ok):
    return MET if ok else NOT_MET


def step_rows(measured):
    """A row per vs_pytorch config: minitrans's step over PyTorch's."""
    rows = []
    for name in CONFIGS:
        target = f"vs_pytorch {name}: step time / PyTorch CUDA eager's <= " \
                 f"{STEP_RATIO_TARGETS[name]:.1f}"
        steps = measured.get("steps", {}).get(name)
        if steps is None:
            why = measured.get("skipped", {}).get(name)
            rows.append((target, f"({why})" if why else "", NOT_MEASURED))
            continue
        ours, theirs = steps
        ratio = ours / theirs
        rows.append((target, f"{ratio:.2f} ({ours * 1e3:.1f} / {theirs * 1e3:.1f} ms)",
                     verdict(ratio <= STEP_RATIO_TARGETS[name])))
    return rows


def memory_row(measured):
    """One row: the largest ratio of GPU memory held over the configs."""
    target = "peak GPU memory held / PyTorch's <= 1.0, every config"
    held = {name: pair for name, pair in measured.get("memory", {}).items()
            if pair[0] and pair[1]}
    if not held:
        return target, "", NOT_MEASURED
    worst = max(held, key=lambda name: held[name][0] / held[name][1])
    ours, theirs = held[worst]
    text = (f"worst {ours / theirs:.2f} ({worst}: {ours / 2**20:.0f} / {theirs / 2**20:.0f} MB)"
            f" of {len(held)} configs")
    return target, text, verdict(ours <= theirs)


def train_row(measured):
    """`train copy` to 100%: the GPU's wall time against the CPU's. A CPU
    run stopped before 100% took longer than it ran."""
    target = "`train copy` to 100%: wall time --device gpu / --device cpu < 1.0"
    train = measured.get("train") or {}
    gpu, cpu = train.get("gpu"), train.get("cpu")
    if gpu is None or cpu is None:
        return target, "", NOT_MEASURED
    if not train.get("cpu_reached"):
        return (target, f"< {gpu / cpu:.2f} (GPU {gpu:.1f} s; the CPU not at 100% after "
                        f"{cpu:.1f} s)", verdict(gpu < cpu))
    return target, f"{gpu / cpu:.2f} (GPU {gpu:.1f} s, CPU {cpu:.1f} s)", verdict(gpu < cpu)


def decoding_rows(measured):
    """Greedy decoding with the cache against PyTorch's recomputation and
    against minitrans's own."""
    against_torch = "greedy decoding with the cache / PyTorch recomputing <= 1.0"
    speedup = f"greedy decoding: minitrans recomputing / with the cache >= " \
              f"{CACHE_SPEEDUP_TARGET:.0f}"
    times = measured.get("decoding") or {}
    cached = times.get("cached")
    rows = []
    torch = times.get("torch")
    if cached and torch:
        rows.append((against_torch, f"{cached / torch:.2f} ({cached:.3f} / {torch:.3f} s)",
                     verdict(cached <= torch)))
    else:
        rows.append((against_torch, "", NOT_MEASURED))
    recomputed = times.get("recomputed")
    if cached and recomputed:
        rows.append((speedup, f"{recomputed / cached:.1f}x ({recomputed:.3f} / {cached:.3f} s)",
                     verdict(recomputed >= CACHE_SPEEDUP_TARGET * cached)))
    else:
        rows.append((speedup, "", NOT_MEASURED))
    return rows


def launch_rows(measured):
    """The launches of a tiny training step and of a decoded token, each
    against its budget, a quarter of the unfused code's."""
    counted = measured.get("launches") or {}
    rows = []
    for key, what in (("step", "a tiny training step"), ("token", "a decoded token")):
        budget = counted.get(f"{key}_budget")
        target = f"launches of {what} <= " + (f"{budget}" if budget else "its budget")
        if counted.get(key) is None or budget is None:
            rows.append((target, "", NOT_MEASURED))
        else:
            rows.append((target, f"{counted[key]}", verdict(counted[key] <= budget)))
    return rows


def fused_row(measured):
    """Every fused kernel equal to its reference on the device."""
    target = "fused = reference on the device, every pair"
    fused = measured.get("fused")
    if not fused or not (fused["passed"] or fused["failed"]):
        return target, "", NOT_MEASURED
    text = f"{len(fused['passed'])} pairs passed, {len(fused['failed'])} failed"
    if fused["failed"]:
        text += f" ({', '.join(fused['failed'])})"
    return target, text, verdict(not fused["failed"])


def text_rows(measured):
    """nanoGPT's GPU recipe: minitrans's step against the twin's, and their
    held-out losses within the gap that dropout's masks of their own allow."""
    text = measured.get("text") or {}
    speed = "nanoGPT's GPU recipe: minitrans's step <= the twin's"
    gap = text.get("gap_allowed")
    losses = ("nanoGPT's GPU recipe: held-out losses within "
              + (f"{gap} nats" if gap is not None else "their gap") + " of the twin's")
    if not text.get("steps"):
        return [(speed, "", NOT_MEASURED), (losses, "", NOT_MEASURED)]
    ours, theirs = text["steps"]
    found = [(speed, f"{ours / theirs:.2f} ({ours * 1e3:.1f} / {theirs * 1e3:.1f} ms)",
              verdict(ours <= theirs))]
    mine, twin = text["held_out"]
    difference = abs(mine - twin)  # NaN: not within
    found.append((losses, f"{difference:.4f} ({mine:.4f} / {twin:.4f})",
                  verdict(difference <= gap)))
    return found


def rows(measured):
    """(target, measured, verdict) for every target, in the table's order."""
    return (step_rows(measured) + [memory_row(measured), train_row(measured)]
            + decoding_rows(measured) + launch_rows(measured) + [fused_row(measured)]
            + text_rows(measured))


def table(measured, rehearsal=False):
    """The targets table, Markdown, with a line counting the verdicts."""
    found = rows(measured)
    counts = {word: sum(row[2] == word for row in found) for word in (MET, NOT_MET, NOT_MEASURED)}
    lines = [f"Targets: {counts[MET]} met, {counts[NOT_MET]} not met, "
             f"{counts[NOT_MEASURED]} not measured, of {len(found)}"
             + (" (a rehearsal: the CPU's numbers, not a GPU's)" if rehearsal else "") + ".", "",
             "| target | measured | verdict |", "| --- | --- | --- |"]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in found]
    return "\n".join(lines)
