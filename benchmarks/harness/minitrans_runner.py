"""minitrans's side of vs_pytorch.py: its training step as the Trainer runs
it, the matrix products of that step listed and timed, decoding and memory."""

import time

from threadpoolctl import threadpool_limits

from harness.matmul_timer import TimedArray, time_products
from harness.workload import (ADAM_SETTINGS, BATCHES, DECODE_LENGTH, DEVICE_BACKENDS,
                              decode_sources, make_batches, minitrans_threads, model_config)


class MinitransRunner:
    """minitrans's training step as the Trainer runs it: the batch split over
    ``workers`` workers (minitrans.training.optimisation.parallel: processes
    on Linux, else threads), each with ``threads // workers`` BLAS threads,
    so that it uses ``threads`` threads in all, as PyTorch does."""

    def __init__(self, sizes, device, threads=2, workers=None):
        import minitrans
        from minitrans.layers.loss import LabelSmoothedCrossEntropy
        from minitrans.model.transformer import Transformer
        from minitrans.training.optimisation.adam import Adam
        from minitrans.training.optimisation.parallel import DataParallel

        minitrans.use(DEVICE_BACKENDS[device], dtype="float32")
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

    def use_threads(self):
        """Run the workers on threads from now on. A worker process computes
        where no TimedArray of this process sees its products: the profiles
        split a step on threads."""
        from minitrans.training.optimisation.parallel import DataParallel

        parallel = self.parallel
        self.parallel = DataParallel(self.model, self.loss_fn, parallel.workers,
                                     parallel.blas_threads, processes=False)

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
        self.use_threads()
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
