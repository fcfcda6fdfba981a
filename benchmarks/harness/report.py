"""The Markdown report of vs_pytorch.py, from its raw measurements.

Its first line names the machine as the libraries see it: the CPU, NumPy's
and PyTorch's BLAS libraries and kernels, the variables that force a
kernel, the threads, each worker's allocator and PyTorch's Adam, and the
matrix-product peak (the best rate of a 2048 x 2048 float32 product, 8192
on a GPU) measured in the same run. Then a row per config:

* the median step of each library and their **ratio** minitrans / PyTorch,
  against its target (``TARGET_RATIO``: tiny at most 1.5, the others 1.0),
  and the **middle half of the rounds' own ratios** (each round's minitrans
  turn over PyTorch's turn right after it): how much a moment of the
  machine moves the ratio;
* the **untuned ratio**, both libraries as they come (glibc's malloc,
  PyTorch's default Adam), and torch.compile's step where it ran;
* tokens per second, and **GFLOP/s**: the floating-point operations of
  every product of two matrices in a minitrans step (2mnk each, forward and
  backward; the same model has the same products in PyTorch) over each
  library's median step, and their share of the peak;
* **peak RSS** of each worker process (interpreter and library included;
  on a GPU the peak its device allocator held instead), at most
  ``TARGET_RSS_RATIO`` times PyTorch's;
* **time in matmul**: the share of minitrans's step spent in its matrix
  products, from a pass in which every array is a ``TimedArray``; on base at
  least ``TARGET_MATMUL_SHARE``.

Under it, page faults and system time per step by allocator; the step
split into its matrix products, timed alone by each library on the
workers' threads at once (the same shapes and layouts), and the rest (the
last column puts PyTorch's time for the products in place of NumPy's); and
decoding, where the cache must be ``TARGET_CACHE_SPEEDUP`` times faster than
recomputing the prefix, with the same tokens.
"""

import statistics

from harness.configs import ALL_CONFIGS, LLAMA_CONFIGS

TARGET_RATIO = {
    "tiny": 1.5,
    "small": 1.0,
    "base": 1.0,
    "copy": 1.0,
    "llama": 1.0,  # PyTorch's side: transformers' LlamaForCausalLM
}  # step time, minitrans / PyTorch
TARGET_RSS_RATIO = 1.2
TARGET_MATMUL_SHARE = 0.6  # on the base config
TARGET_CACHE_SPEEDUP = 5.0
MB = 2**20


def _mark(ok):
    return "yes" if ok else "**no**"


def median_steps(result):
    """The median step time of each worker (label: seconds) for one config."""
    return {label: statistics.median(times) for label, times in result["times"].items() if times}


def round_ratios(result):
    """minitrans / PyTorch of each round: the mean step of minitrans's turn
    over the mean step of PyTorch's turn right after it. None where the raw
    measurements do not record the steps per turn."""
    per_turn = result.get("steps_per_turn")
    if not per_turn:
        return None
    ours, theirs = (result["times"][label] for label in ("minitrans", "torch"))
    return [statistics.fmean(ours[start:start + per_turn])
            / statistics.fmean(theirs[start:start + per_turn])
            for start in range(0, min(len(ours), len(theirs)), per_turn)]


def spread_cell(result):
    """The middle half of the rounds' own ratios, "q1 to q3": how far a
    moment of the machine moves the ratio. Four rounds at least."""
    ratios = round_ratios(result)
    if ratios is None:
        return "n/a"
    if len(ratios) < 4:
        return f"n/a ({len(ratios)} rounds)"
    first, _, third = statistics.quantiles(ratios, n=4)
    return f"{first:.2f} to {third:.2f}"


def per_step(result, label):
    """(page faults, system seconds) per timed step of one worker, or None."""
    usage = result.get("rusage", {}).get(label)
    if not usage or not usage["steps"]:
        return None
    return usage["faults"] / usage["steps"], usage["system_seconds"] / usage["steps"]


def untuned_ratio(result):
    """minitrans / PyTorch with glibc's default malloc and PyTorch's
    default Adam, or None if not run."""
    steps = median_steps(result)
    if "minitrans default" not in steps or "torch default" not in steps:
        return None
    return steps["minitrans default"] / steps["torch default"]


def compile_cell(result, ours):
    """torch.compile's column: its median step, minitrans's step over it,
    and its compile time; or why it failed."""
    compiled = result.get("compile")
    if compiled is None:
        return None
    if "error" in compiled:
        return f"failed: {compiled['error']}".replace("|", "/")
    step = median_steps(result)["torch.compile"]
    return f"{step * 1e3:.0f} ms ({ours / step:.2f}; compiled in {compiled['seconds']:.0f} s)"


def config_cell(name, result):
    """The config's name, and its sizes where they are not the config's own
    (--quick's llama)."""
    sizes = result.get("sizes")
    if not sizes or sizes == ALL_CONFIGS.get(name):
        return name
    shown = ", ".join(f"{key} {sizes[key]}" for key in ("d_model", "N", "d_ff", "vocab_size",
                                                         "length", "batch") if key in sizes)
    return f"{name} (quick sizes: {shown})"


def skipped_rows(results, width):
    """A row for each config the run skipped, with the reason."""
    return ["| " + " | ".join([name, f"skipped: {reason}".replace("|", "/")]
                              + ["-"] * (width - 2)) + " |"
            for name, reason in results.get("skipped", {}).items()]


def training_table(results):
    """A row per config (and per skipped config, with the reason). On a GPU,
    memory is the peak its device allocator held (``device_bytes``)
    instead of the peak RSS, and the targets, which are the CPU's, are not
    judged."""
    peak = results["peak_flops"]
    gpu = results["machine"].get("device") == "gpu"
    memory_key, memory_title = (("device_bytes", "peak GPU memory held") if gpu
                                else ("peak_rss", "peak RSS"))
    compiled = any("compile" in result for result in results["configs"].values())
    columns = ["config", "minitrans step", "PyTorch step", "ratio" if gpu else "ratio (target)",
               "rounds' ratios, middle half",
               "ratio, untuned (glibc default malloc, PyTorch's default Adam)"]
    columns += ["torch.compile step (minitrans / it; compile time)"] if compiled else []
    columns += ["tokens/s minitrans / PyTorch", "GFLOP/s minitrans / PyTorch (% of peak)",
                f"{memory_title} minitrans / PyTorch (ratio)", "time in matmul", "targets met"]
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join(["---"] * len(columns)) + " |"]
    for name, result in results["configs"].items():
        sizes = result.get("sizes") or ALL_CONFIGS[name]  # raw measurements without sizes
        steps = median_steps(result)
        ours, theirs = steps["minitrans"], steps["torch"]
        ratio = ours / theirs
        tokens = sizes["batch"] * sizes["length"]
        profile = result["profile"]
        flops = profile["matmul_flops"]
        rss = {k: v[memory_key] for k, v in result["memory"].items()}
        rss_ratio = rss["minitrans"] / rss["torch"]
        share = profile["matmul_seconds"] / ours if profile["matmul_seconds"] is not None else None
        met = ratio <= TARGET_RATIO[name] and rss_ratio <= TARGET_RSS_RATIO
        if name == "base" and share is not None:
            met = met and share >= TARGET_MATMUL_SHARE
        flop_text = "n/a" if flops is None else (
            f"{flops / ours / 1e9:.0f} ({flops / ours / peak:.0%}) / "
            f"{flops / theirs / 1e9:.0f} ({flops / theirs / peak:.0%})")
        untuned = untuned_ratio(result)
        cells = [config_cell(name, result), f"{ours * 1e3:.0f} ms", f"{theirs * 1e3:.0f} ms",
                 f"{ratio:.2f}" + ("" if gpu else f" (<= {TARGET_RATIO[name]})"),
                 spread_cell(result), "n/a" if untuned is None else f"{untuned:.2f}"]
        cells += [compile_cell(result, ours) or "n/a"] if compiled else []
        cells += [f"{tokens / ours:,.0f} / {tokens / theirs:,.0f}", flop_text,
                  f"{rss['minitrans'] / MB:.0f} / {rss['torch'] / MB:.0f} MB ({rss_ratio:.2f})",
                  "n/a" if share is None else f"{share:.0%}",
                  "n/a (CPU targets)" if gpu else _mark(met)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += skipped_rows(results, len(columns))
    return "\n".join(lines)


def references_line(results):
    """What PyTorch's side of each config was, under the table."""
    names = list(results["configs"]) + list(results.get("skipped", {}))
    mirrors = [name for name in names if name not in LLAMA_CONFIGS]
    llamas = [name for name in names if name in LLAMA_CONFIGS]
    parts = []
    if mirrors:
        parts.append(f"{', '.join(mirrors)}: minitrans's Transformer against "
                     "torch.nn.Transformer with its weights (minitrans.interop.torch)")
    if llamas:
        version = results["machine"].get("transformers")
        version = f"(version {version}) " if version else ""
        parts.append(f"{', '.join(llamas)}: minitrans's DecoderOnlyLM (RMSNorm, rotary, "
                     "grouped-query attention, SwiGLU, no biases) against transformers' "
                     f"{version}LlamaForCausalLM, eager attention, the same sizes and "
                     "weights, mean cross-entropy of the next tokens")
    return "PyTorch's side: " + "; ".join(parts) + "." if parts else None


ALLOCATOR_ROWS = (("minitrans", "torch", None),  # None: the run's --allocator
                  ("minitrans default", "torch default", "glibc default"),
                  (None, "torch.compile", "torch.compile"))


def allocator_table(results):
    """Page faults and system time per step, each library with each
    allocator (and torch.compile's worker): what the allocator costs."""
    allocator = results["machine"].get("allocator", "tuned")
    lines = ["| config | allocator | step minitrans / PyTorch (ratio) "
             "| page faults per step minitrans / PyTorch "
             "| system time per step minitrans / PyTorch |",
             "| --- | --- | --- | --- | --- |"]
    for name, result in results["configs"].items():
        steps = median_steps(result)
        for ours, theirs, row in ALLOCATOR_ROWS:
            if theirs not in steps or per_step(result, theirs) is None:
                continue
            sides = [per_step(result, label) if label else None for label in (ours, theirs)]
            step_text = " / ".join("-" if label is None else f"{steps[label] * 1e3:.0f}"
                                   for label in (ours, theirs)) + " ms"
            if ours is not None:
                step_text += f" ({steps[ours] / steps[theirs]:.2f})"
            faults = " / ".join("-" if side is None else f"{side[0]:,.0f}" for side in sides)
            system = " / ".join("-" if side is None else f"{side[1] * 1e3:.0f}"
                                for side in sides) + " ms"
            label = ("glibc " if allocator == "tuned" else "") + allocator if row is None else row
            lines.append(f"| {name} | {label} | {step_text} | {faults} | {system} |")
    return "\n".join(lines) if len(lines) > 2 else None


def products_table(results):
    """Each step split into its matrix products, timed alone by each
    library, and the rest: how much of the ratio is the BLAS library.

    The products are minitrans's (one worker's list, on as many threads at
    once as it has workers): PyTorch's rest is its step less the time its
    own BLAS takes for the same products. The last column is the ratio
    minitrans's step would have if NumPy's products took PyTorch's time."""
    lines = ["| config | matrix products alone: minitrans (NumPy) / PyTorch (ratio) "
             "| the rest of the step: minitrans / PyTorch (ratio) "
             "| step ratio with PyTorch's time for the products |",
             "| --- | --- | --- | --- |"]
    for name, result in results["configs"].items():
        alone = result.get("products_alone")
        if not alone:
            continue
        steps = median_steps(result)
        rest = {label: steps[label] - alone[label] for label in ("minitrans", "torch")}
        with_their_products = (rest["minitrans"] + alone["torch"]) / steps["torch"]
        lines.append(
            f"| {name} | {alone['minitrans'] * 1e3:.0f} / {alone['torch'] * 1e3:.0f} ms "
            f"({alone['minitrans'] / alone['torch']:.2f}) "
            f"| {rest['minitrans'] * 1e3:.0f} / {rest['torch'] * 1e3:.0f} ms "
            f"({rest['minitrans'] / rest['torch']:.2f}) | {with_their_products:.2f} |"
        )
    return "\n".join(lines) if len(lines) > 2 else None


def decoding_table(decoding):
    cached, recomputed = min(decoding["cached"]), min(decoding["recomputed"])
    same = decoding["cached_tokens"] == decoding["recomputed_tokens"]
    speedup = recomputed / cached
    return "\n".join([
        "| decoding (small config, 32 sequences x 64 tokens) | seconds (best of runs) |",
        "| --- | --- |",
        f"| minitrans greedy, key/value cache | {cached:.2f} |",
        f"| minitrans greedy, recomputing the prefix | {recomputed:.2f} |",
        f"| cache speed-up (target >= {TARGET_CACHE_SPEEDUP:.0f}x), same tokens | "
        f"{speedup:.1f}x {_mark(speedup >= TARGET_CACHE_SPEEDUP)}, "
        f"{'identical' if same else '**different**'} |",
        f"| minitrans beam search, width 4 | {min(decoding['beam4']):.2f} |",
        "| PyTorch greedy, recomputing the prefix (nn.Transformer has no cache) "
        f"| {min(decoding['torch']):.2f} |",
    ])


def gpu_header(results):
    """The first line of a run on a GPU: the GPU and the CUDA of each
    library; the host, whose BLAS does not matter there, in a few words."""
    machine = results["machine"]
    return (
        f"{machine['date']}, {machine['gpu']}; NumPy {machine['numpy']}; host {machine['cpu']} "
        f"with {machine['cores']} cores, {machine['threads']} threads; Python "
        f"{machine['python']}; device gpu, float32 products without TF32 in both; minitrans "
        f"on one worker. Matrix-product peak (float32, 8192 wide) measured in this run: "
        f"{results['peak_flops'] / 1e12:.1f} TFLOP/s."
    )


def machine_text(machine):
    """"date, CPU (arch) with N cores; NumPy and PyTorch with their BLAS
    libraries; the BLAS kernel variables; Python": how every CPU report of
    the benchmarks begins (``machine_info.machine``'s facts)."""
    variables = machine.get("kernel_variables")
    variables = ", ".join(variables) if variables else "OPENBLAS_CORETYPE unset"
    arch = f" ({machine['arch']})" if machine.get("arch") else ""
    return (
        f"{machine['date']}, {machine['cpu']}{arch} with {machine['cores']} cores; "
        f"NumPy {machine['numpy']} BLAS: {machine.get('numpy_blas', 'not recorded')}; "
        f"PyTorch {machine['torch']} BLAS: {machine.get('torch_blas', 'not recorded')}; "
        f"{variables}; Python {machine['python']}"
    )


def header(results):
    """The report's first line: the machine and its BLAS kernels first,
    then the run's settings."""
    machine = results["machine"]
    if machine.get("gpu"):
        return gpu_header(results)
    workers = machine.get("workers", 1)  # raw measurements that do not name them
    kind = machine.get("worker_kind", "threads")  # runs that did not record it used threads
    split = (f" (minitrans: {workers} worker {kind}, each on a part of the batch with "
             f"{machine['blas_threads']} BLAS thread(s))" if workers > 1 else "")
    first = next(iter(results["configs"].values()), {})
    seen = first.get("allocators", {})
    allocators = "; ".join(f"{label}: {text}" for label, text in seen.items())
    adams = "; ".join(f"{label}: {text}" for label, text in first.get("adam", {}).items()
                      if label != "minitrans" and not label.startswith("minitrans "))
    return (
        f"{machine_text(machine)}; {machine['threads']} threads{split}, "
        f"device {machine['device']}, float32; allocators: {allocators or 'not recorded'}; "
        f"PyTorch's Adam: {adams or 'not recorded'}. "
        f"Matrix-product peak measured in this run: {results['peak_flops'] / 1e9:.0f} GFLOP/s."
    )


def report(results):
    parts = [header(results), "", training_table(results)]
    references = references_line(results)
    if references:
        parts += ["", references]
    for table in (allocator_table(results), products_table(results)):
        if table:
            parts += ["", table]
    if "decoding" in results:
        parts += ["", decoding_table(results["decoding"])]
    return "\n".join(parts)
