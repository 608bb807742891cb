"""A plain PyTorch training script, as a user of the torchrun export runs
it: `sh launch.sh ARGS` starts the layout's ranks around it, and the script
applies the strategy itself from its own arguments (the fidelity table says
every dimension but the rank count is the script's): DistributedDataParallel
over gloo when there are several ranks, the micro-batch, accumulation,
gradient checkpointing, AdamW's implementation and attention. It reports what
the run applied (probe.py)."""

import argparse
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import (Probe, TokenData, add_user_arguments, shut_down, tiny_model,  # noqa: E402
                   user_optimizer)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--gradient-accumulation-steps", type=int, default=1)
    add_user_arguments(p)
    p.add_argument("--gradient-checkpointing", action="store_true")
    args = p.parse_args()

    world = int(os.environ["WORLD_SIZE"])
    if world > 1:
        dist.init_process_group("gloo")
    model = tiny_model(os.environ["AUTOACCEL_TEST_MODEL_DIR"],
                       os.environ.get("AUTOACCEL_TEST_MODEL_KWARGS"))
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    probe = Probe()
    probe.watch(model)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = user_optimizer(model.parameters(), args)
    probe.count_steps(optimizer)
    data = TokenData(256, 16)
    sampler = torch.utils.data.DistributedSampler(data) if world > 1 else None
    loader = iter(torch.utils.data.DataLoader(data, batch_size=args.batch_size, sampler=sampler))
    model.train()
    ga = args.gradient_accumulation_steps
    for _ in range(args.max_steps):
        for i in range(ga):
            batch = next(loader)
            last = i == ga - 1
            with contextlib.nullcontext() if last or world == 1 else model.no_sync():
                (model(**batch).loss / ga).backward()
        optimizer.step()
        optimizer.zero_grad()
    probe.report(optimizer, probe.optimizer_steps,
                 ddp=isinstance(model, torch.nn.parallel.DistributedDataParallel))
    del model, optimizer
    shut_down()


if __name__ == "__main__":
    main()
