"""An ordinary DeepSpeed training loop, as a user of the deepspeed export runs
it:
    deepspeed --num_nodes=1 --num_gpus=N deepspeed_train.py --deepspeed --deepspeed_config ds_config.json ARGS
It builds its own optimizer (the export's ds_config.json has no optimizer
section; the fidelity note says which class and arguments) and passes it to
deepspeed.initialize, and reports what the run applied (probe.py).

With sequence_parallel_size N > 1 in ds_config.json (the context_parallel
row's note) it does what DeepSpeed-Ulysses asks of a script: registers
Ulysses attention with transformers (UlyssesSPAttentionHF), passes its mpu to
deepspeed.initialize, wraps its DataLoader in UlyssesSPDataLoaderAdapter
(each rank gets 1/N of every sequence, with position_ids and labels shifted
before the split) and averages the loss over the sequence ranks weighted by
their counted labels, as DeepSpeed's Ulysses recipe does."""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import (Probe, TokenData, add_user_arguments, shut_down, tiny_model,  # noqa: E402
                   user_optimizer)

import deepspeed  # noqa: E402
import torch  # noqa: E402
from deepspeed.runtime.sequence_parallel.ulysses_sp import (  # noqa: E402
    UlyssesSPAttentionHF, UlyssesSPDataLoaderAdapter)
from torch.distributed.nn.functional import all_gather  # noqa: E402

SEQ_LEN = 16  # run_export.py's


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
    with open(args.deepspeed_config) as f:
        ds_config = json.load(f)
    sp = ds_config.get("sequence_parallel_size", 1)
    mpu = None
    if sp > 1:
        mpu = UlyssesSPAttentionHF.register_with_transformers(
            model, model.config._attn_implementation, sequence_parallel_size=sp,
            micro_batch_size=ds_config["train_micro_batch_size_per_gpu"], seq_length=SEQ_LEN)
    engine, optimizer, _, _ = deepspeed.initialize(args=args, model=model, optimizer=optimizer,
                                                   mpu=mpu)
    data = TokenData(model.config.vocab_size, SEQ_LEN)
    mbs = engine.train_micro_batch_size_per_gpu()
    forwards = args.max_steps * engine.gradient_accumulation_steps()
    tokens = set()  # each forward's sequence length on this rank
    engine.train()
    if sp == 1:
        for i in range(forwards):
            batch = data.ids[i * mbs:(i + 1) * mbs]
            tokens.add(batch.shape[1])
            loss = engine(input_ids=batch, labels=batch).loss
            engine.backward(loss)
            engine.step()
    else:
        group = mpu.get_sequence_parallel_group()
        positions = torch.arange(SEQ_LEN).expand(mbs, SEQ_LEN)
        loader = torch.utils.data.DataLoader(
            [{**data[i], "position_ids": positions[0]} for i in range(len(data))],
            batch_size=mbs)
        loader = UlyssesSPDataLoaderAdapter(
            loader, sp_rank=mpu.get_sequence_parallel_rank(), sp_group=group,
            sp_world_size=sp, device=torch.device("cpu"))
        for _, batch in zip(range(forwards), loader):
            tokens.add(batch["input_ids"].shape[1])
            logits = engine(input_ids=batch["input_ids"],
                            position_ids=batch["position_ids"]).logits
            labels = batch["shift_labels"]
            summed = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)).float(), labels.reshape(-1),
                ignore_index=-100, reduction="sum")
            counted = (labels != -100).sum().float()
            loss = (sum(all_gather(summed, group=group)) /
                    sum(all_gather(counted, group=group)))
            engine.backward(loss)
            engine.step()
    probe.report(optimizer, engine.global_steps,
                 zero_stage=engine.zero_optimization_stage(), ds_micro_batch=mbs,
                 ds_accumulation=engine.gradient_accumulation_steps(),
                 ds_bf16=engine.bfloat16_enabled(), ds_fp16=engine.fp16_enabled(),
                 optimizer_wrapper=type(engine.optimizer).__name__,
                 sequence_parallel_size=sp, tokens_per_forward=sorted(tokens))


if __name__ == "__main__":
    main()
    shut_down()  # after main() has let go of the model, engine and optimizer
