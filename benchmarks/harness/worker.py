"""One implementation in a process of its own, answering the parent of
vs_pytorch.py: a JSON request per line on stdin, a JSON answer per line on
stdout (everything else the libraries print goes to stderr)."""

import json
import resource
import statistics
import sys
import time

from harness.allocators import allocator_in_use
from harness.llama_runner import MinitransLlamaRunner, TorchLlamaRunner
from harness.minitrans_runner import MinitransRunner
from harness.torch_runner import TorchRunner
from harness.workload import one_line, peak_rss_bytes, rss_bytes


def train(runner, steps):
    """Time ``steps`` steps, and count the page faults (minor and major) and
    the system time (all threads) that they took, from getrusage. On a GPU
    a step's time runs from an idle device to the end of its last kernel
    (``runner.synchronize``, where the runner has one)."""
    synchronize = getattr(runner, "synchronize", lambda: None)
    synchronize()
    before = resource.getrusage(resource.RUSAGE_SELF)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        runner.step()
        synchronize()
        times.append(time.perf_counter() - start)
    after = resource.getrusage(resource.RUSAGE_SELF)
    faults = (after.ru_minflt - before.ru_minflt) + (after.ru_majflt - before.ru_majflt)
    return {"times": times, "median": statistics.median(times), "faults": faults,
            "system_seconds": after.ru_stime - before.ru_stime}


def make_runner(kind, sizes, device, threads, workers=None, fused_adam=True):
    """kind: "minitrans", "torch" or "torch.compile"; sizes with
    ``model="llama"``: the decoder-only pair of harness.llama_runner (PyTorch's
    side transformers' LlamaForCausalLM), otherwise the encoder-decoder.
    ``fused_adam``: PyTorch's fused Adam, or (False) its default."""
    compiled = kind == "torch.compile"
    if sizes.get("model") == "llama":
        if kind == "minitrans":
            return MinitransLlamaRunner(sizes, device, threads, workers)
        return TorchLlamaRunner(sizes, device, threads, compiled, fused_adam)
    if kind == "minitrans":
        return MinitransRunner(sizes, device, threads, workers)
    return TorchRunner(sizes, device, threads, compiled, fused_adam)


def serve(kind, sizes, device, threads, workers=None, fused_adam=True):
    """Answer the parent's requests until it closes stdin. A request that
    fails (a compilation that cannot run, say) is answered with its error,
    {"error": one line}, and the worker waits for the next."""
    answers = sys.stdout
    sys.stdout = sys.stderr  # keep the answer channel clean of anything the libraries print
    baseline = rss_bytes()  # after importing NumPy, before the library under test
    runner = make_runner(kind, sizes, device, threads, workers, fused_adam)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = answer_request(runner, request, baseline)
        except Exception as error:  # noqa: BLE001  (reported to the parent, which decides)
            answer = {"error": one_line(error)}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0


def answer_request(runner, request, baseline):
    action = request["do"]
    if action == "ready":
        return {"allocator": allocator_in_use(), "adam": getattr(runner, "adam", "minitrans's")}
    if action == "train":
        return train(runner, request["steps"])
    if action == "profile":
        return runner.profile(request["steps"])
    if action == "decode":
        return runner.decode(request["cache"])
    if action == "beam":
        return runner.beam()
    if action == "products":
        threads, blas_threads = request.get("threads", 1), request.get("blas_threads")
        # one time per product
        return {"seconds": runner.time_products(request["products"], threads, blas_threads)}
    if action == "memory":
        return {"peak_rss": peak_rss_bytes(), "baseline_rss": baseline, **runner.memory()}
    raise ValueError(f"request: unknown action {action!r}")
