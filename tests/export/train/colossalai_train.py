"""An ordinary ColossalAI training loop, as a user of the colossalai export
runs it:
    PYTHONPATH=. torchrun ... colossalai_train.py ARGS
It imports the exported autoaccel_colossalai.py, boosts its own model and
optimizer with the module's make_booster(), follows the module's constants
for what no plugin argument carries (micro-batch, accumulation, autocast,
checkpointing, attention), and reports what the run applied (probe.py).
Its arguments are the user's: the optimizer's hyperparameters and
implementation, as the fidelity report's optimizer row says.

No pipeline branch: pipeline parallelism (booster.execute_pipeline) does not
run on CPU ranks in colossalai 0.5.0 (see run_export.py)."""

import argparse
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import (Probe, TokenData, add_user_arguments, shut_down, tiny_model,  # noqa: E402
                   user_optimizer)

import autoaccel_colossalai as exported  # noqa: E402  the export, on PYTHONPATH
import colossalai  # noqa: E402
import torch  # noqa: E402
from colossalai.accelerator import get_accelerator  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    add_user_arguments(p)
    args = p.parse_args()

    colossalai.launch_from_torch()
    model = tiny_model(os.environ["AUTOACCEL_TEST_MODEL_DIR"],
                       attn_implementation=exported.ATTN_IMPLEMENTATION)
    if exported.GRADIENT_CHECKPOINTING:
        model.gradient_checkpointing_enable()
    probe = Probe()
    probe.watch(model)
    optimizer = user_optimizer(model.parameters(), args)

    booster = exported.make_booster()
    plugin = booster.plugin
    data = plugin.prepare_dataloader(TokenData(model.config.vocab_size, 16),
                                     batch_size=exported.MICRO_BATCH_SIZE)
    model, optimizer, _, data, _ = booster.boost(model, optimizer, dataloader=data)
    probe.count_steps(optimizer)
    device = get_accelerator().get_current_device()
    if exported.AUTOCAST_DTYPE is None:
        autocast = contextlib.nullcontext
    else:
        def autocast():
            return torch.autocast(get_accelerator().name,
                                  dtype=getattr(torch, exported.AUTOCAST_DTYPE))

    model.train()
    batches = iter(data)
    accumulation = exported.GRAD_ACCUM_STEPS
    for _ in range(args.max_steps):
        for i in range(accumulation):
            batch = {k: v.to(device) for k, v in next(batches).items()}
            last = i == accumulation - 1
            sync = (booster.no_sync(model, optimizer) if not last and plugin.support_no_sync()
                    else contextlib.nullcontext())
            with sync:
                with autocast():
                    loss = model(**batch).loss / accumulation
                booster.backward(loss, optimizer)
        optimizer.step()
        optimizer.zero_grad()

    wrapped = [type(m).__name__ for m in model.modules()]
    probe.report(
        optimizer, probe.optimizer_steps,
        # LowLevelZeroPlugin renames its class's __name__; __qualname__ stays.
        plugin=type(plugin).__qualname__,
        plugin_tp_size=getattr(plugin, "tp_size", 1),
        plugin_pp_size=getattr(plugin, "pp_size", 1),
        plugin_zero_stage=getattr(plugin, "zero_stage", getattr(plugin, "stage", 0)),
        plugin_precision=getattr(plugin, "precision", None),
        booster_mixed_precision=type(booster.mixed_precision).__name__
        if booster.mixed_precision else None,
        optimizer_wrapper=type(optimizer).__name__,
        ddp="DistributedDataParallel" in wrapped)
    shut_down()


if __name__ == "__main__":
    main()
