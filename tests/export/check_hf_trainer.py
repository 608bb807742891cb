"""The hf-trainer export's flags parse with transformers' own
HfArgumentParser(TrainingArguments), __post_init__ included (it reads the
fsdp_config.json / ds_config.json the flags name, and HF's DeepSpeed glue
checks the ds_config against the flags).

This machine has no GPU, and TrainingArguments refuses --bf16 unless the
device supports it or --use_cpu is given; the check appends --use_cpu (the
only flag it adds) so that the rest of the validation runs."""

import json
import os

from exports import main


def check(strategy, doc, out):
    from transformers import HfArgumentParser, TrainingArguments

    with open(os.path.join(out, "training_args.txt")) as f:
        flags = f.read().split()
    assert flags == doc["files"]["training_args.txt"].split()
    cwd = os.getcwd()
    os.chdir(out)  # the flags name their files relative to the launch directory
    try:
        (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
            args=flags + ["--use_cpu"])
    finally:
        os.chdir(cwd)
    keys = dict(kv.split("=") for kv in strategy.split(","))
    assert args.per_device_train_batch_size == int(keys["mbs"])
    assert args.gradient_accumulation_steps == int(keys["ga"])
    assert args.bf16 == ("--bf16" in flags) and args.fp16 == ("--fp16" in flags)
    if keys.get("sharding") == "fsdp":
        assert args.fsdp and args.fsdp_config["version"] == 2
    if args.deepspeed:
        ds = args.hf_deepspeed_config
        # HF's own consistency check of ds_config.json against the flags; it
        # counts every process as data-parallel, and this process is alone.
        if int(keys.get("dp", 1)) == 1:
            ds.trainer_config_process(args)
        return f"deepspeed zero stage {ds.config['zero_optimization']['stage']}"
    with open(os.path.join(out, "from_pretrained_kwargs.json")) as f:
        kwargs = json.load(f)
    assert kwargs["attn_implementation"] in ("sdpa", "eager")
    return f"optim {args.optim.value}, attn {kwargs['attn_implementation']}"


if __name__ == "__main__":
    main(check, "hf-trainer")
