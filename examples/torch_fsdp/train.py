"""A plain-PyTorch training script tuned by autoaccel as a black-box launcher
trial, on autoaccel.torch.

A causal language model built from a config.json (the job's model when the job
gave --model-config, else the tiny Llama beside this script; random weights,
random token ids) trains with the strategy in $AUTOACCEL_STRATEGY_FILE, read
through autoaccel.trial. The strategy is applied by one line,

    model, optimizer, step = autoaccel.torch.apply(trial, model, {"lr": 1e-4})

(DDP / ZeroRedundancyOptimizer / FSDP2 fully_shard for the sharding, DTensor
tensor parallelism with the model's own plan, autocast or pure bf16 with fp32
master copies, activation checkpointing of the first checkpoint_percent % of
the layers, math or SDPA attention, fused AdamW, CPU offload of the optimizer
state, micro-batches with gradient accumulation: python/README.md, "Apply a
tuned strategy to your own PyTorch model"), and autoaccel.trial.run_loop times
and reports each optimizer step. Launched once per rank by the worker (or by
torchrun) with the torchrun variables; standalone, the flags below stand in
for the strategy file:

    python train.py --precision bf16 --checkpointing full --steps 5
    torchrun --nproc-per-node=2 train.py --sharding fsdp

What autoaccel.torch cannot apply (pipeline or sequence parallelism, tensor
parallelism on a model without a plan, ...) exits with status 2 and the
reason on stderr, which the worker records as a FAILED trial.
"""

import argparse
import json
import os
import sys

import torch
import transformers

import autoaccel.torch as aat
from autoaccel import trial as aa

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    print("train.py: " + message, file=sys.stderr)
    sys.exit(2)


def standalone_trial(argv):
    p = argparse.ArgumentParser(description="standalone flags (autoaccel's strategy file "
                                "replaces them)")
    p.add_argument("--micro-batch-size", type=int, default=2)
    p.add_argument("--grad-accum-steps", type=int, default=1)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16", "pure_bf16"])
    p.add_argument("--checkpointing", default="none", choices=["none", "selective", "full"])
    p.add_argument("--checkpoint-percent", type=int, default=100)
    p.add_argument("--attention", default="sdpa", choices=["math", "sdpa"])
    p.add_argument("--optimizer", default="adamw", choices=["adamw", "fused_adamw"])
    p.add_argument("--sharding", default="none", choices=["none", "zero1", "zero2", "fsdp"])
    p.add_argument("--tensor-parallel", type=int, default=1)
    p.add_argument("--offload", default="none", choices=["none", "cpu"])
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    dp = world // a.tensor_parallel
    strategy = {"data_parallel": dp, "tensor_parallel": a.tensor_parallel,
                "sharding": a.sharding if dp > 1 else "none",
                "micro_batch_size": a.micro_batch_size, "grad_accum_steps": a.grad_accum_steps,
                "precision": a.precision, "checkpointing": a.checkpointing,
                "checkpoint_percent": a.checkpoint_percent if a.checkpointing != "none" else 100,
                "attention": a.attention, "optimizer": a.optimizer, "offload": a.offload}
    return aa.Trial.standalone(strategy=strategy, seq_len=a.seq_len,
                               global_batch_size=a.micro_batch_size * a.grad_accum_steps * dp,
                               measured_steps=a.steps)


def model_config(trial):
    """The job's model (strategy.json's "model", a Hugging Face config.json),
    else config.json beside this script."""
    config = (trial.model or {}).get("config")
    if not config:
        with open(os.path.join(HERE, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    config = dict(config)
    kind = config.pop("model_type", None)
    if kind not in transformers.CONFIG_MAPPING:
        fail("model_type %r: not a transformers model type" % kind)
    return transformers.CONFIG_MAPPING[kind](**config)


def main(argv):
    trial = aa.current(standalone=standalone_trial(argv))
    config = model_config(trial)
    torch.manual_seed(0)  # the same initial weights on every rank
    model = transformers.AutoModelForCausalLM.from_config(config)
    trial.report_model(sum(p.numel() for p in model.parameters()))
    try:
        applied = aat.apply(trial, model, {"lr": 1e-4})
    except ValueError as e:  # UnsupportedStrategy, or a strategy for another world size
        fail(str(e))
    model, optimizer, step = applied
    s = applied.strategy
    mbs, ga = s["micro_batch_size"], s["grad_accum_steps"]
    if mbs * ga * applied.dp_size != trial.global_batch_size:
        fail("micro_batch_size %d x grad_accum_steps %d x data_parallel %d != global batch %d"
             % (mbs, ga, applied.dp_size, trial.global_batch_size))

    # Random token ids; the tensor-parallel ranks of one data-parallel rank
    # train on the same ones.
    generator = torch.Generator().manual_seed(1000 + applied.dp_rank)

    def one_step(_):
        return step(torch.randint(0, config.vocab_size, (mbs * ga, trial.seq_len + 1),
                                  generator=generator))

    times = aa.run_loop(one_step, trial)
    if times:
        print("train.py: rank %d trained %d steps of %s, median step %.3f s; applied: %s"
              % (trial.rank, len(times), type(model).__name__, sorted(times)[len(times) // 2],
                 "; ".join(applied.applied)), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
