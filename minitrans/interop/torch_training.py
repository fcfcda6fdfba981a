"""Training with PyTorch as minitrans trains: its loss, and its optimisers
with their learning-rate schedules, written with PyTorch's own classes
(``minitrans.interop.torch`` gives them, with the models' weights).

``paper_optimizer`` is the paper's Adam and schedule (§5.3), which the
paper's tasks train with; ``gpt_optimizer`` and ``gpt_schedule`` are
GPT's recipe (as nanoGPT writes it), which ``minitrans train text`` trains
with: AdamW, its decay on the matrices only, and a warm-up then a cosine.
The parity tests train a model and its PyTorch twin side by side with them.
"""

import torch

from minitrans.training.optimisation.schedule import cosine_lr, transformer_lr


class TokenCrossEntropy(torch.nn.CrossEntropyLoss):
    """``CrossEntropyLoss`` on (..., V) logits and (...) targets, as
    minitrans's loss takes them (PyTorch's wants (N, V) and (N,))."""

    def forward(self, logits, targets):
        return super().forward(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def paper_loss(config, label_smoothing=0.1):
    """PyTorch's loss with minitrans's definition: label smoothing, padding
    ignored, the mean over the other target tokens."""
    return TokenCrossEntropy(label_smoothing=label_smoothing, ignore_index=config.pad_id)


def paper_optimizer(torch_model, warmup, factor=1.0, start_step=0):
    """Adam (beta1 0.9, beta2 0.98, eps 1e-9) and the paper's learning-rate
    schedule as a LambdaLR: the optimiser minitrans's trainer uses. Call
    ``scheduler.step()`` after each ``optimizer.step()``. ``start_step``:
    steps already taken elsewhere (in minitrans), so the schedule goes on
    from there."""
    optimizer = torch.optim.Adam(torch_model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    d_model = getattr(
        torch_model, "module", torch_model
    ).config.d_model  # DistributedDataParallel wraps it
    # LambdaLR counts from 0; the paper's schedule counts steps from 1
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: transformer_lr(start_step + step + 1, d_model, warmup, factor))
    return optimizer, scheduler


def gpt_optimizer(torch_model, lr, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1, **options):
    """PyTorch's AdamW as GPT's recipe uses it, minitrans's
    ``Adam(..., decay="matrices")``: two parameter groups, the tensors of two
    or more dimensions (weight matrices, embedding and position tables)
    decayed by ``weight_decay``, the others (biases, norms) not at all.
    ``options`` go to ``torch.optim.AdamW`` (``fused=True``: its fused kernel)."""
    parameters = [p for p in torch_model.parameters() if p.requires_grad]  # a tied one once
    groups = [{"params": [p for p in parameters if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, **options)


def gpt_schedule(optimizer, peak, min_lr, warmup, total):
    """``cosine_lr`` as a LambdaLR: warm-up to ``peak``, then a cosine down
    to ``min_lr`` at step ``total``. The optimiser's lr is set to 1, so the
    schedule's value is the learning rate itself. Call ``scheduler.step()``
    after each ``optimizer.step()``."""
    for group in optimizer.param_groups:
        group["lr"] = 1.0
    # LambdaLR counts from 0; the schedule counts steps from 1
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: cosine_lr(step + 1, peak, min_lr, warmup, total))


def clip_grad_norm(parameters, max_norm):
    """minitrans's clipping (``optimisation.clipping.clip_grad_norm``) of
    PyTorch gradients: all scaled by max_norm / norm when their global norm
    passes max_norm. ``torch.nn.utils.clip_grad_norm_`` scales by max_norm /
    (norm + 1e-6), about 1e-6 less when norms are near 1, which a
    side-by-side run sees in its losses from the first clipped step on.
    Returns the norm before clipping."""
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    if torch.isfinite(norm) and norm > max_norm:
        for grad in grads:
            grad.mul_(max_norm / norm)
    return norm
