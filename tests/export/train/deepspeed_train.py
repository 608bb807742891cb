"""An ordinary DeepSpeed training loop, as a user of the deepspeed export runs
it:
    deepspeed --num_nodes=1 --num_gpus=N deepspeed_train.py --deepspeed --deepspeed_config ds_config.json ARGS
It builds its own optimizer (the export's ds_config.json has no optimizer
section; the fidelity note says which class and arguments) and passes it to
deepspeed.initialize, and reports what the run applied (probe.py)."""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import (Probe, TokenData, add_user_arguments, shut_down, tiny_model,  # noqa: E402
                   user_optimizer)

import deepspeed  # noqa: E402
import torch  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--local_rank", type=int, default=-1)  # the deepspeed launcher's
    add_user_arguments(p)
    p.add_argument("--gradient-checkpointing", action="store_true")
    deepspeed.add_config_arguments(p)
    args = p.parse_args()

    deepspeed.init_distributed(dist_backend="gloo")  # CPU ranks
    model = tiny_model(os.environ["AUTOACCEL_TEST_MODEL_DIR"],
                       os.environ.get("AUTOACCEL_TEST_MODEL_KWARGS"))
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    probe = Probe()
    probe.watch(model)
    optimizer = user_optimizer(model.parameters(), args)
    engine, optimizer, _, _ = deepspeed.initialize(args=args, model=model, optimizer=optimizer)
    data = TokenData(model.config.vocab_size, 16)
    mbs = engine.train_micro_batch_size_per_gpu()
    engine.train()
    for i in range(args.max_steps * engine.gradient_accumulation_steps()):
        batch = data.ids[i * mbs:(i + 1) * mbs]
        loss = engine(input_ids=batch, labels=batch).loss
        engine.backward(loss)
        engine.step()
    probe.report(optimizer, engine.global_steps,
                 zero_stage=engine.zero_optimization_stage(), ds_micro_batch=mbs,
                 ds_accumulation=engine.gradient_accumulation_steps(),
                 ds_bf16=engine.bfloat16_enabled(), ds_fp16=engine.fp16_enabled(),
                 optimizer_wrapper=type(engine.optimizer).__name__)


if __name__ == "__main__":
    main()
    shut_down()  # after main() has let go of the model, engine and optimizer
