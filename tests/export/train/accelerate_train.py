"""An ordinary accelerate training loop, as a user of the accelerate export
runs it:
    accelerate launch --config_file accelerate_config.yaml accelerate_train.py ARGS
Its arguments are what the export's fidelity notes leave to the script: the
DataLoader's batch size, Accelerator(gradient_accumulation_steps=...), the
optimizer (torch.optim.AdamW with fused=True or foreach=False), gradient
checkpointing and the attention implementation. It reports what the run
applied (probe.py)."""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import (Probe, TokenData, add_user_arguments, shut_down, tiny_model,  # noqa: E402
                   user_optimizer)

import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402


def steps_taken(model, probe):
    """Optimizer steps so far: DeepSpeed's engine's own count (it steps
    inside engine.step() at its accumulation boundaries), else the probe's
    count of the optimizer's steps."""
    engine_steps = getattr(model, "global_steps", None)
    return engine_steps if engine_steps is not None else probe.optimizer_steps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--gradient-accumulation-steps", type=int, default=1)
    add_user_arguments(p)
    p.add_argument("--gradient-checkpointing", action="store_true")
    args = p.parse_args()

    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
    model = tiny_model(os.environ["AUTOACCEL_TEST_MODEL_DIR"],
                       os.environ.get("AUTOACCEL_TEST_MODEL_KWARGS"))
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    probe = Probe()
    probe.watch(model)
    optimizer = user_optimizer(model.parameters(), args)
    scheduler = torch.optim.lr_scheduler.ConstantLR(optimizer, factor=1.0, total_iters=0)
    data = torch.utils.data.DataLoader(TokenData(model.config.vocab_size, 16),
                                       batch_size=args.batch_size)
    model, optimizer, data, scheduler = accelerator.prepare(model, optimizer, data, scheduler)
    probe.count_steps(optimizer)
    model.train()
    for batch in data:
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        if steps_taken(model, probe) == args.max_steps:
            break
    state = accelerator.state
    extra = {"distributed_type": str(state.distributed_type).split(".")[-1],
             "mixed_precision": str(state.mixed_precision),
             "accelerate_accumulation": accelerator.gradient_accumulation_steps,
             "ddp": isinstance(model, torch.nn.parallel.DistributedDataParallel)}
    if getattr(state, "deepspeed_plugin", None) is not None:
        engine = model
        extra.update(zero_stage=engine.zero_optimization_stage(),
                     ds_micro_batch=engine.train_micro_batch_size_per_gpu(),
                     ds_accumulation=engine.gradient_accumulation_steps(),
                     ds_bf16=engine.bfloat16_enabled(), ds_fp16=engine.fp16_enabled(),
                     optimizer_wrapper=type(engine.optimizer).__name__)
    if getattr(state, "fsdp_plugin", None) is not None:
        extra.update(fsdp_version=state.fsdp_plugin.fsdp_version,
                     fsdp_reshard_after_forward=bool(state.fsdp_plugin.reshard_after_forward))
    probe.report(optimizer, steps_taken(model, probe), **extra)


if __name__ == "__main__":
    main()
    shut_down()  # after main() has let go of the model, engine and optimizer
