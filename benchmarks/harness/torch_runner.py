"""PyTorch's side of vs_pytorch.py: the same model as minitrans's worker,
converted by minitrans.interop.torch, trained in eager mode or, with
``compiled=True``, with ``torch.compile`` of the model (its default mode; the
loss and Adam stay eager).

Adam is PyTorch's fused implementation (``fused=True``), which its
documentation ranks fastest of its three (fused, then foreach, then the
for-loop it takes by default on the CPU): a reference gets its best
documented setting. ``fused_adam=False`` gives PyTorch's default, for the
untuned column."""

import time

from harness.matmul_timer import time_products
from harness.workload import (ADAM_SETTINGS, BATCHES, DECODE_BATCH, DECODE_LENGTH,
                              decode_sources, make_batches, model_config, one_line)


def torch_adam(torch, parameters, fused):
    """(torch.optim.Adam over ``parameters``, the words the report gives
    it): with ``fused``, the fused kernel where this PyTorch has one for the
    device, else PyTorch's default implementation, and why."""
    parameters = list(parameters)
    if not fused:
        return torch.optim.Adam(parameters, **ADAM_SETTINGS), "PyTorch's default (for-loop)"
    try:
        return torch.optim.Adam(parameters, **ADAM_SETTINGS, fused=True), "fused"
    except (RuntimeError, TypeError, ValueError) as error:  # a PyTorch without it
        return (torch.optim.Adam(parameters, **ADAM_SETTINGS),
                f"PyTorch's default (fused: {one_line(error)})")


class TorchRunner:
    def __init__(self, sizes, device, threads, compiled=False, fused_adam=True):
        import torch

        import minitrans
        from minitrans.interop.torch import paper_loss, to_torch
        from minitrans.model.transformer import Transformer

        torch.set_num_threads(threads)
        torch.set_float32_matmul_precision("highest")  # no TF32 on a GPU, as in CuPy
        self.torch = torch
        self.device = torch.device("cuda" if device == "gpu" else "cpu")
        config = model_config(sizes, max(sizes["length"], DECODE_LENGTH) + 1)
        with minitrans.using("numpy", dtype="float32"):  # the same weights as the other worker
            self.model = to_torch(Transformer(config, rng=0), self.device)
        # compiled lazily, on the first step: the first step's time includes it
        self.forward = torch.compile(self.model) if compiled else self.model
        self.optimizer, self.adam = torch_adam(torch, self.model.parameters(), fused_adam)
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
        loss = self.loss_fn(self.forward(src, tgt_in), tgt_out)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def synchronize(self):
        """Wait until the GPU has done all the work queued so far."""
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def decode(self, cache):
        """Greedy decoding by recomputing the prefix: nn.Transformer has no
        key/value cache."""
        torch = self.torch
        config = self.model.config
        src = torch.from_numpy(decode_sources(config.vocab_size)).to(self.device)
        self.model.eval()
        self.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            prefix = torch.full((DECODE_BATCH, 1), 1, dtype=torch.long, device=self.device)  # <bos>
            for _ in range(DECODE_LENGTH):
                next_token = self.model(src, prefix)[:, -1].argmax(dim=-1, keepdim=True)
                prefix = torch.cat([prefix, next_token], dim=1)
        tokens = prefix[:, 1:].cpu().numpy()
        return {"seconds": time.perf_counter() - start, "tokens": tokens.tolist()}

    def time_products(self, products, threads=1, blas_threads=None):
        """minitrans's list of matrix products timed alone, by PyTorch: with
        ``threads`` above 1 on that many threads at once, each with
        ``blas_threads`` of PyTorch's threads, as minitrans's workers run
        them (harness.matmul_timer.time_products)."""
        torch = self.torch
        synchronize = torch.cuda.synchronize if self.device.type == "cuda" else (lambda: None)
        blas_threads = blas_threads or torch.get_num_threads()
        step_threads = torch.get_num_threads()
        torch.set_num_threads(blas_threads)
        try:
            # OpenMP's thread count is each thread's own: a new thread starts
            # with OMP_NUM_THREADS, so each of the timing's threads sets it
            return time_products(products, torch.matmul,
                                 lambda a: torch.from_numpy(a).to(self.device), synchronize,
                                 threads=threads,
                                 thread_setup=lambda: torch.set_num_threads(blas_threads))
        finally:
            torch.set_num_threads(step_threads)

    def memory(self):
        """On a GPU, the peak bytes PyTorch's caching allocator held (what
        CuPy's pool holds, to compare), and the peak its tensors used."""
        if self.device.type == "cuda":
            cuda = self.torch.cuda
            return {"device_bytes": cuda.max_memory_reserved(),
                    "device_allocated_bytes": cuda.max_memory_allocated()}
        return {}
