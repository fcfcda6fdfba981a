"""One implementation in a process of its own, answering the parent of
vs_pytorch.py: a JSON request per line on stdin, a JSON answer per line on
stdout (everything else the libraries print goes to stderr)."""

import json
import os
import resource
import statistics
import sys
import time

import numpy as np

from allocators import allocator_in_use

BATCHES = 4  # distinct batches, used in turn
ADAM_SETTINGS = dict(lr=1e-4, betas=(0.9, 0.98), eps=1e-9)  # both libraries' Adam
DECODE_BATCH, DECODE_LENGTH = 32, 64


def rss_bytes():
    """Resident memory of this process now."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def make_batches(sizes, seed=0):
    """Random ids without padding: (src, tgt_in, tgt_out) of (batch, length) each."""
    rng = np.random.default_rng(seed)
    shape = (sizes["batch"], sizes["length"])
    return [
        tuple(rng.integers(4, sizes["vocab_size"], size=shape) for _ in range(3))
        for _ in range(BATCHES)
    ]


def decode_sources(vocab_size, seed=1):
    """The (DECODE_BATCH, DECODE_LENGTH) source ids that every decoding run
    translates, the same in both workers."""
    return np.random.default_rng(seed).integers(4, vocab_size, size=(DECODE_BATCH, DECODE_LENGTH))


def model_config(sizes, max_len):
    from minitrans.model.config import ModelConfig

    return ModelConfig(
        vocab_size=sizes["vocab_size"],
        d_model=sizes["d_model"],
        h=sizes["h"],
        N=sizes["N"],
        d_ff=sizes["d_ff"],
        dropout=0.1,
        max_len=max_len,
    )


def minitrans_threads(device, threads, workers=None):
    """(workers, BLAS threads per worker) of minitrans's step: by default as
    many workers as ``threads`` on the CPU and one on a GPU, the threads
    shared out among them."""
    workers = (1 if device == "gpu" else threads) if workers is None else workers
    return workers, max(1, threads // workers)


class MinitransRunner:
    """minitrans's training step as the Trainer runs it: the batch split over
    ``workers`` threads (minitrans.training.parallel), each with ``threads // workers``
    BLAS threads, so that it uses ``threads`` threads in all, as PyTorch does."""

    def __init__(self, sizes, device, threads=2, workers=None):
        import minitrans
        from minitrans.layers.loss import LabelSmoothedCrossEntropy
        from minitrans.model.transformer import Transformer
        from minitrans.training.optim import Adam
        from minitrans.training.parallel import DataParallel

        minitrans.use("cupy" if device == "gpu" else "numpy", dtype="float32")
        self.minitrans, self.device = minitrans, device
        self.model = Transformer(
            model_config(sizes, max(sizes["length"], DECODE_LENGTH) + 1), rng=0
        )
        self.optimizer = Adam(self.model, **ADAM_SETTINGS)
        self.loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=0)
        workers, blas_threads = minitrans_threads(device, threads, workers)
        self.parallel = DataParallel(self.model, self.loss_fn, workers, blas_threads)
        self.batches = [tuple(map(minitrans.to_device, batch)) for batch in make_batches(sizes)]
        self.count = 0

    def next_batch(self):
        """The next of the batches, as forward_backward takes it: (the model's
        inputs, the targets)."""
        src, tgt_in, tgt_out = self.batches[self.count % BATCHES]
        self.count += 1
        return (src, tgt_in), tgt_out

    def step(self):
        inputs, targets = self.next_batch()
        self.optimizer.zero_grad()  # as the Trainer does: the model's tree is not walked
        loss = self.parallel.forward_backward(inputs, targets)
        self.optimizer.step()
        return float(loss)

    def synchronize(self):
        """Wait until the GPU has done all the work queued so far: CuPy
        returns from a call before its kernels have run."""
        if self.device == "gpu":
            self.minitrans.get_xp().cuda.Device().synchronize()

    def profile(self, steps):
        """Seconds and FLOPs in matrix products per step: every array of the
        model becomes a TimedArray, whose @ is timed and counted.

        With W workers, W threads compute products at once: the seconds are
        the threads' time in products divided by W, the share of each
        thread's step. ``products`` lists one worker's products ([a shape,
        b shape, a layout, b layout, how often a step computes it]), which
        ``time_products`` times alone, on W threads at once with W workers,
        so that the step splits into its products and the rest."""
        if self.device == "gpu":
            return {"matmul_seconds": None, "matmul_flops": None, "step_seconds": None}
        from matmul_timer import TimedArray

        self.model.apply_to_arrays(lambda a: a.view(TimedArray))
        self.optimizer.m = {k: v.view(TimedArray) for k, v in self.optimizer.m.items()}
        self.optimizer.v = {k: v.view(TimedArray) for k, v in self.optimizer.v.items()}
        TimedArray.reset()
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        elapsed = time.perf_counter() - start
        workers = self.parallel.workers
        products = [[*key, count // (steps * workers)]
                    for key, count in TimedArray.products.items()]
        return {
            "matmul_seconds": TimedArray.seconds / steps / workers,
            "matmul_flops": TimedArray.flops / steps,
            "vector_flops": TimedArray.vector_flops / steps,
            "step_seconds": elapsed / steps,
            "products": products,
            "workers": workers,
            "blas_threads": self.parallel.blas_threads,
        }

    def time_products(self, products, threads=1, blas_threads=None):
        """This step's matrix products timed alone, by NumPy (or CuPy): the
        same list the other worker times with PyTorch. With ``threads``
        above 1, each product runs on that many threads at once, each with
        ``blas_threads`` BLAS threads, as the step's workers run it."""
        from matmul_timer import time_products
        from threadpoolctl import threadpool_limits

        xp = self.minitrans.get_xp()
        synchronize = xp.cuda.Device().synchronize if self.device == "gpu" else (lambda: None)
        with threadpool_limits(blas_threads, user_api="blas"):  # None: as it is
            return time_products(products, xp.matmul, self.minitrans.to_device, synchronize,
                                 threads=threads)

    def decode(self, cache):
        from minitrans.decoding import greedy

        src = self.minitrans.to_device(decode_sources(self.model.config.vocab_size))
        self.model.eval()
        self.synchronize()
        start = time.perf_counter()
        # eos_id=-1: no token ends a row, so every row is decoded to its full length
        tokens = greedy(self.model, src, DECODE_LENGTH, eos_id=-1, use_cache=cache)
        tokens = self.minitrans.to_numpy(tokens)
        return {"seconds": time.perf_counter() - start, "tokens": tokens.tolist()}

    def beam(self):
        from minitrans.decoding import beam_search

        src = self.minitrans.to_device(decode_sources(self.model.config.vocab_size))
        self.model.eval()
        self.synchronize()
        start = time.perf_counter()
        self.minitrans.to_numpy(
            beam_search(self.model, src, beam_size=4, max_len=DECODE_LENGTH, eos_id=-1)
        )
        return {"seconds": time.perf_counter() - start}

    def memory(self):
        """On a GPU, the bytes CuPy's memory pool holds: its peak, as the pool
        keeps every block it was given (PyTorch's worker gives the peak its
        caching allocator held, to compare)."""
        if self.device == "gpu":
            import cupy

            return {"device_bytes": cupy.get_default_memory_pool().total_bytes()}
        return {}


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


def one_line(error):
    """An exception as one short line, for the report: its type and the
    first line of its message."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def make_runner(kind, sizes, device, threads, workers=None, fused_adam=True):
    """kind: "minitrans", "torch" or "torch.compile"; sizes with
    ``model="llama"``: the decoder-only pair of llama_runner.py (PyTorch's
    side transformers' LlamaForCausalLM), otherwise the encoder-decoder.
    ``fused_adam``: PyTorch's fused Adam, or (False) its default."""
    compiled = kind == "torch.compile"
    if sizes.get("model") == "llama":
        from llama_runner import MinitransLlamaRunner, TorchLlamaRunner  # noqa: E402

        if kind == "minitrans":
            return MinitransLlamaRunner(sizes, device, threads, workers)
        return TorchLlamaRunner(sizes, device, threads, compiled, fused_adam)
    if kind == "minitrans":
        return MinitransRunner(sizes, device, threads, workers)
    from torch_runner import TorchRunner  # noqa: E402  (it imports this module)

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
