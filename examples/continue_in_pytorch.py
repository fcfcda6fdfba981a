"""Carry a model trained with minitrans on to PyTorch, train it there on one
or many devices with DistributedDataParallel, and bring it back.

Run from the repository root, after `pip install ".[train,torch]"` and
`minitrans train copy` (which writes runs/copy/checkpoint.npz):

    python examples/continue_in_pytorch.py runs/copy/checkpoint.npz --steps 100
    torchrun --nproc_per_node=2 examples/continue_in_pytorch.py runs/copy/checkpoint.npz

Launched by torchrun, every process trains on its share of each batch
(gloo on CPUs, NCCL on GPUs) and DistributedDataParallel averages the
gradients, so N processes take about the steps that one takes with the
whole batch (each averages its loss over its own share of the tokens).
The batches are the ones the minitrans trainer would have drawn next, the
loss and the optimiser are the paper's (minitrans.interop.torch.paper_loss,
paper_optimizer; Adam's moments start afresh). At the end the first
process copies the weights back into minitrans, decodes the held-out set
with it and, with --out, writes a checkpoint that `minitrans translate` and
`minitrans evaluate` read.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from minitrans.core import backend
from minitrans.interop.torch import from_torch, paper_loss, paper_optimizer, to_torch
from minitrans.training.optimisation import evaluation
from minitrans.training import experiment

HELD_OUT = 200  # held-out pairs decoded before and after


def start_processes():
    """(rank, world size, device); a process group only under torchrun."""
    if "RANK" not in os.environ:
        return 0, 1, torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if torch.cuda.is_available():
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        return rank, world, torch.device("cuda", local_rank)
    return rank, world, torch.device("cpu")


def as_tensor(array, device):
    return None if array is None else torch.from_numpy(backend.to_numpy(array)).to(device)


def main():
    parser = argparse.ArgumentParser(
        description="Continue training a minitrans checkpoint with PyTorch."
    )
    parser.add_argument("checkpoint", help="a checkpoint written by `minitrans train`")
    parser.add_argument(
        "--steps", type=int, default=100, help="PyTorch training steps (default 100)"
    )
    parser.add_argument("--out", help="write the result as a minitrans checkpoint here")
    args = parser.parse_args()
    if args.out and os.path.exists(args.out):  # never overwrite a checkpoint
        parser.error(f"--out {args.out}: exists; choose another file")
    rank, world, device = start_processes()

    trainer = experiment.resume_trainer(args.checkpoint, progress=False, log=lambda *_: None)
    task, model, first = trainer.task, trainer.model, trainer.step + 1
    if rank == 0:
        before, _ = evaluation.exact_match(trainer.evaluated_model, task, task.valid[:HELD_OUT])
        print(f"minitrans after {trainer.step} steps: held-out exact match {before:.1%}")

    torch_model = to_torch(model.train(), device)
    parallel = DistributedDataParallel(torch_model) if world > 1 else torch_model
    loss_fn = paper_loss(model.config, trainer.config.label_smoothing)
    optimizer, schedule = paper_optimizer(
        torch_model, trainer.config.warmup, trainer.config.lr_factor, start_step=trainer.step
    )
    for step in range(first, first + args.steps):
        pairs = trainer.batch_pairs(step)[rank::world]  # this process's share
        batch = task.make_batch(pairs)
        inputs = [as_tensor(a, device) for a in evaluation.model_inputs(batch)]
        logits = parallel(*inputs)
        loss = loss_fn(logits, as_tensor(batch.tgt_out, device))
        optimizer.zero_grad()
        loss.backward()  # DistributedDataParallel averages gradients across processes here
        optimizer.step()
        schedule.step()
        if rank == 0 and (step - first) % 20 == 0:
            print(f"PyTorch step {step}: loss {loss.item():.4f} (on {world} process(es), {device})")

    if rank == 0:
        trainer.model = from_torch(torch_model.cpu(), model).eval()  # filled in place
        trainer.step = step
        if trainer.average is not None:  # PyTorch kept no moving average: start it anew here
            trainer.average.restart()
        after, _ = evaluation.exact_match(trainer.model, task, task.valid[:HELD_OUT])
        print(f"back in minitrans after {step} steps: held-out exact match {after:.1%}")
        if args.out:
            trainer.optimizer = type(trainer.optimizer)(
                model, betas=(0.9, 0.98), eps=1e-9
            )  # moments stayed in PyTorch
            trainer.save(args.out)
            print(f"checkpoint: {args.out}")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
