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

BATCHES = 4  # distinct batches, used in turn
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
        self.optimizer = Adam(self.model, lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
        self.loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=0)
        workers, blas_threads = minitrans_threads(device, threads, workers)
        self.parallel = DataParallel(self.model, self.loss_fn, workers, blas_threads)
        self.batches = [tuple(map(minitrans.to_device, batch)) for batch in make_batches(sizes)]
        self.count = 0

    def step(self):
        src, tgt_in, tgt_out = self.batches[self.count % BATCHES]
        self.count += 1
        self.model.zero_grad()
        loss = self.parallel.forward_backward((src, tgt_in), tgt_out)
        self.optimizer.step()
        return float(loss)  # waits for the device

    def profile(self, steps):
        """Seconds and FLOPs in matrix products per step: every array of the
        model becomes a TimedArray, whose @ is timed and counted.

        With W workers, W threads compute products at once: the seconds are
        the threads' time in products divided by W, the share of each
        thread's step. The list of products is kept only with one worker:
        then the products run one at a time, with every BLAS thread, as they
        do when each is timed alone, so the step splits into the products
        and the rest."""
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
        products = (
            [[*key, count // steps] for key, count in TimedArray.products.items()]
            if workers == 1
            else None
        )
        return {
            "matmul_seconds": TimedArray.seconds / steps / workers,
            "matmul_flops": TimedArray.flops / steps,
            "vector_flops": TimedArray.vector_flops / steps,
            "step_seconds": elapsed / steps,
            "products": products,
            "workers": workers,
        }

    def time_products(self, products):
        """This step's matrix products timed alone, by NumPy (or CuPy): the
        same list the other worker times with PyTorch."""
        from matmul_timer import time_products

        xp = self.minitrans.get_xp()
        synchronize = xp.cuda.Device().synchronize if self.device == "gpu" else (lambda: None)
        return time_products(products, xp.matmul, self.minitrans.to_device, synchronize)

    def decode(self, cache):
        from minitrans.decoding import greedy

        src = self.minitrans.to_device(decode_sources(self.model.config.vocab_size))
        self.model.eval()
        start = time.perf_counter()
        # eos_id=-1: no token ends a row, so every row is decoded to its full length
        tokens = greedy(self.model, src, DECODE_LENGTH, eos_id=-1, use_cache=cache)
        tokens = self.minitrans.to_numpy(tokens)
        return {"seconds": time.perf_counter() - start, "tokens": tokens.tolist()}

    def beam(self):
        from minitrans.decoding import beam_search

        src = self.minitrans.to_device(decode_sources(self.model.config.vocab_size))
        self.model.eval()
        start = time.perf_counter()
        self.minitrans.to_numpy(
            beam_search(self.model, src, beam_size=4, max_len=DECODE_LENGTH, eos_id=-1)
        )
        return {"seconds": time.perf_counter() - start}

    def memory(self):
        if self.device == "gpu":
            import cupy

            return {"device_bytes": cupy.get_default_memory_pool().total_bytes()}
        return {}


class TorchRunner:
    def __init__(self, sizes, device, threads):
        import torch

        import minitrans
        from minitrans.interop.torch import paper_loss, to_torch
        from minitrans.model.transformer import Transformer

        torch.set_num_threads(threads)
        self.torch = torch
        self.device = torch.device("cuda" if device == "gpu" else "cpu")
        config = model_config(sizes, max(sizes["length"], DECODE_LENGTH) + 1)
        with minitrans.using("numpy", dtype="float32"):  # the same weights as the other worker
            self.model = to_torch(Transformer(config, rng=0), self.device)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9
        )
        self.loss_fn = paper_loss(config, 0.1)
        self.batches = [
            tuple(torch.from_numpy(a).to(self.device) for a in batch)
            for batch in make_batches(sizes)
        ]
        self.count = 0

    def step(self):
        src, tgt_in, tgt_out = self.batches[self.count % BATCHES]
        self.count += 1
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(src, tgt_in), tgt_out)
        loss.backward()
        self.optimizer.step()
        return loss.item()  # waits for the device

    def decode(self, cache):
        """Greedy decoding by recomputing the prefix: nn.Transformer has no
        key/value cache."""
        torch = self.torch
        config = self.model.config
        src = torch.from_numpy(decode_sources(config.vocab_size)).to(self.device)
        self.model.eval()
        start = time.perf_counter()
        with torch.no_grad():
            prefix = torch.full((DECODE_BATCH, 1), 1, dtype=torch.long, device=self.device)  # <bos>
            for _ in range(DECODE_LENGTH):
                next_token = self.model(src, prefix)[:, -1].argmax(dim=-1, keepdim=True)
                prefix = torch.cat([prefix, next_token], dim=1)
        tokens = prefix[:, 1:].cpu().numpy()
        return {"seconds": time.perf_counter() - start, "tokens": tokens.tolist()}

    def time_products(self, products):
        """minitrans's list of matrix products timed alone, by PyTorch."""
        from matmul_timer import time_products

        torch = self.torch
        synchronize = torch.cuda.synchronize if self.device.type == "cuda" else (lambda: None)
        return time_products(
            products, torch.matmul, lambda a: torch.from_numpy(a).to(self.device), synchronize
        )

    def memory(self):
        if self.device.type == "cuda":
            return {"device_bytes": self.torch.cuda.max_memory_allocated()}
        return {}


def serve(kind, sizes, device, threads, workers=None):
    answers = sys.stdout
    sys.stdout = sys.stderr  # keep the answer channel clean of anything the libraries print
    baseline = rss_bytes()  # after importing NumPy, before the library under test
    runner = (MinitransRunner(sizes, device, threads, workers) if kind == "minitrans"
              else TorchRunner(sizes, device, threads))
    for line in sys.stdin:
        request = json.loads(line)
        action = request["do"]
        if action == "ready":
            answer = {}
        elif action == "train":
            times = []
            for _ in range(request["steps"]):
                start = time.perf_counter()
                runner.step()
                times.append(time.perf_counter() - start)
            answer = {"times": times, "median": statistics.median(times)}
        elif action == "profile":
            answer = runner.profile(request["steps"])
        elif action == "decode":
            answer = runner.decode(request["cache"])
        elif action == "beam":
            answer = runner.beam()
        elif action == "products":
            answer = {"seconds": runner.time_products(request["products"])}  # one per product
        elif action == "memory":
            answer = {"peak_rss": peak_rss_bytes(), "baseline_rss": baseline, **runner.memory()}
        else:
            raise ValueError(f"request: unknown action {action!r}")
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0
