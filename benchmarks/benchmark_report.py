"""The Markdown report of vs_pytorch.py, from its raw measurements."""

import statistics

TARGET_RATIO = {
    "tiny": 1.5,
    "small": 1.0,
    "base": 1.0,
    "copy": 1.0,
}  # step time, minitrans / PyTorch
TARGET_RSS_RATIO = 1.2
TARGET_MATMUL_SHARE = 0.6  # on the base config
TARGET_CACHE_SPEEDUP = 5.0
MB = 2**20


def _mark(ok):
    return "yes" if ok else "**no**"


def median_steps(result):
    """The median step time of each library, in seconds, for one config."""
    return {label: statistics.median(times) for label, times in result["times"].items()}


def training_table(results):
    from vs_pytorch import CONFIGS

    peak = results["peak_flops"]
    lines = [
        "| config | minitrans step | PyTorch step | ratio (target) | tokens/s minitrans / PyTorch "
        "| GFLOP/s minitrans / PyTorch (% of peak) | peak RSS minitrans / PyTorch (ratio) "
        "| time in matmul | targets met |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, result in results["configs"].items():
        sizes = CONFIGS[name]
        steps = median_steps(result)
        ours, theirs = steps["minitrans"], steps["torch"]
        ratio = ours / theirs
        tokens = sizes["batch"] * sizes["length"]
        profile = result["profile"]
        flops = profile["matmul_flops"]
        rss = {k: v["peak_rss"] for k, v in result["memory"].items()}
        rss_ratio = rss["minitrans"] / rss["torch"]
        share = profile["matmul_seconds"] / ours if profile["matmul_seconds"] is not None else None
        met = ratio <= TARGET_RATIO[name] and rss_ratio <= TARGET_RSS_RATIO
        if name == "base" and share is not None:
            met = met and share >= TARGET_MATMUL_SHARE
        flop_text = (
            "n/a"
            if flops is None
            else (
                f"{flops / ours / 1e9:.0f} ({flops / ours / peak:.0%}) / {flops / theirs / 1e9:.0f} ({flops / theirs / peak:.0%})"
            )
        )
        lines.append(
            f"| {name} | {ours * 1e3:.0f} ms | {theirs * 1e3:.0f} ms | {ratio:.2f} (<= {TARGET_RATIO[name]}) "
            f"| {tokens / ours:,.0f} / {tokens / theirs:,.0f} | {flop_text} "
            f"| {rss['minitrans'] / MB:.0f} / {rss['torch'] / MB:.0f} MB ({rss_ratio:.2f}) "
            f"| {'n/a' if share is None else f'{share:.0%}'} | {_mark(met)} |"
        )
    return "\n".join(lines)


def products_table(results):
    """Each step split into its matrix products, timed alone by each
    library, and the rest: how much of the ratio is the BLAS library."""
    lines = ["| config | matrix products alone: minitrans (NumPy) / PyTorch (ratio) "
             "| the rest of the step: minitrans / PyTorch (ratio) |",
             "| --- | --- | --- |"]
    for name, result in results["configs"].items():
        alone = result.get("products_alone")
        if not alone:
            continue
        steps = median_steps(result)
        rest = {label: steps[label] - alone[label] for label in steps}
        lines.append(
            f"| {name} | {alone['minitrans'] * 1e3:.0f} / {alone['torch'] * 1e3:.0f} ms "
            f"({alone['minitrans'] / alone['torch']:.2f}) "
            f"| {rest['minitrans'] * 1e3:.0f} / {rest['torch'] * 1e3:.0f} ms ({rest['minitrans'] / rest['torch']:.2f}) |"
        )
    return "\n".join(lines) if len(lines) > 2 else None


def decoding_table(decoding):
    cached, recomputed = min(decoding["cached"]), min(decoding["recomputed"])
    same = decoding["cached_tokens"] == decoding["recomputed_tokens"]
    speedup = recomputed / cached
    return "\n".join(
        [
            "| decoding (small config, 32 sequences x 64 tokens) | seconds (best of runs) |",
            "| --- | --- |",
            f"| minitrans greedy, key/value cache | {cached:.2f} |",
            f"| minitrans greedy, recomputing the prefix | {recomputed:.2f} |",
            f"| cache speed-up (target >= {TARGET_CACHE_SPEEDUP:.0f}x), same tokens | "
            f"{speedup:.1f}x {_mark(speedup >= TARGET_CACHE_SPEEDUP)}, {'identical' if same else '**different**'} |",
            f"| minitrans beam search, width 4 | {min(decoding['beam4']):.2f} |",
            f"| PyTorch greedy, recomputing the prefix (nn.Transformer has no cache) | {min(decoding['torch']):.2f} |",
        ]
    )


def report(results):
    machine = results["machine"]
    workers = machine.get("workers", 1)  # not recorded before the workers came
    split = (f" (minitrans: {workers} worker threads, each on a part of the batch with "
             f"{machine['blas_threads']} BLAS thread(s))" if workers > 1 else "")
    header = (
        f"{machine['date']}, {machine['cpu']} with {machine['cores']} cores, {machine['threads']} threads{split}, "
        f"device {machine['device']}; Python {machine['python']}, NumPy {machine['numpy']}, "
        f"PyTorch {machine['torch']}; float32. Matrix-product peak measured in this run: "
        f"{results['peak_flops'] / 1e9:.0f} GFLOP/s."
    )
    parts = [header, "", training_table(results)]
    products = products_table(results)
    if products:
        parts += ["", products]
    if "decoding" in results:
        parts += ["", decoding_table(results["decoding"])]
    return "\n".join(parts)
