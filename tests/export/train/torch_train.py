"""A plain PyTorch training loop on autoaccel.torch, as a user of the torch
export runs it:
    torchrun ... torch_train.py ARGS
It applies the exported strategy.json to its own model with
autoaccel.torch.apply and reports what the run applied (probe.py)."""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import Probe, TokenData, add_user_arguments, tiny_model  # noqa: E402

import autoaccel.strategy  # noqa: E402
import autoaccel.torch  # noqa: E402
import torch  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    add_user_arguments(p, implementation=False)
    args = p.parse_args()

    model = tiny_model(os.environ["AUTOACCEL_TEST_MODEL_DIR"])
    probe = Probe()
    probe.watch(model)
    base = model
    applied = autoaccel.torch.apply(
        "strategy.json", model,
        {"lr": args.lr, "weight_decay": args.weight_decay, "betas": tuple(args.betas),
         "eps": args.eps})
    model, optimizer, step = applied
    probe.count_steps(optimizer)
    strategy = autoaccel.strategy.parse("strategy.json")
    per_rank = strategy["micro_batch_size"] * strategy["grad_accum_steps"]
    data = TokenData(model.config.vocab_size if hasattr(model, "config") else 256, 16)
    for i in range(args.max_steps):
        ids = data.ids[i * per_rank:(i + 1) * per_rank]
        step({"input_ids": ids, "labels": ids})
    probe.attn_implementation = base.config._attn_implementation
    probe.report(optimizer, probe.optimizer_steps, applied=applied.applied,
                 ddp=isinstance(model, torch.nn.parallel.DistributedDataParallel),
                 optimizer_wrapper=type(optimizer).__name__,
                 fsdp=any(type(m).__name__.startswith("FSDP") for m in base.modules()))


if __name__ == "__main__":
    main()
