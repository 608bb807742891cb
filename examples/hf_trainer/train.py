"""A Hugging Face Trainer script tuned by autoaccel as a black-box launcher trial.

A tiny Llama built from --model-config (random weights, no download) trains on
random token ids (labels = inputs). Every Trainer setting comes from
TrainingArguments flags, parsed by transformers' own HfArgumentParser: under
autoaccel the launcher passes the hf-trainer export's training_args.txt
({*training_args}) and its from_pretrained_kwargs.json; standalone you pass
them yourself:

    python train.py --model-config config.json --output_dir /tmp/out \\
        --per_device_train_batch_size=2 --gradient_accumulation_steps=2 --bf16
    torchrun --nproc-per-node=2 train.py ... (DDP; gloo on CPU)

What the export's flags do here, on CPU (what this script adds, in brackets):
precision bf16 (--bf16, autocast) / fp16 (--fp16; CPU autocast runs it too) /
fp32; pure_bf16 (dtype=bfloat16 from the kwargs file); checkpointing
(--activation_checkpointing, or fsdp_config's activation_checkpointing under
--fsdp); micro-batch and gradient accumulation; --optim adamw_torch /
adamw_torch_fused; sharding none at dp > 1 -> DDP; zero1 / zero2 -> DeepSpeed
(--deepspeed ds_config; on CPU its first run compiles DeepSpeed's shared-memory
op, about a minute, cached in ~/.cache/torch_extensions); fsdp -> the
Trainer's FSDP2 (--fsdp with fsdp_config) on accelerators only: accelerate
1.15 enables FSDP for GPU-like devices, and on CPU the Trainer would train
plain DDP, so this script refuses fsdp there (exit 2). Checked on CPU with
gloo: torch 2.11, transformers 5.23, accelerate 1.15, deepspeed 0.19.8.
[--use_cpu for a cpu trial or when no CUDA device is visible; report_to
none, no saving, no logging, max_steps = warm-up + measured steps; the
AutoaccelCallback reports each step and stops the run.]
"""

import argparse
import gc
import json
import os
import sys
import time

import torch
from transformers import (AutoConfig, AutoModelForCausalLM, HfArgumentParser, Trainer,
                          TrainerCallback, TrainingArguments)

from autoaccel import trial as aa
from autoaccel.hf import AutoaccelCallback


class RandomTokens(torch.utils.data.Dataset):
    """`samples` sequences of `seq_len` random token ids; labels = inputs."""

    def __init__(self, samples, seq_len, vocab_size, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, vocab_size, (samples, seq_len), generator=g)

    def __len__(self):
        return self.ids.shape[0]

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def accelerate_version():
    import importlib.metadata
    return importlib.metadata.version("accelerate")


def fail(message):
    """A setting this script cannot run: exit 2 with the reason on stderr
    (the worker records the trial FAILED with it)."""
    print("train.py: " + message, file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    ours = argparse.ArgumentParser(description=__doc__.split("\n")[0], add_help=False)
    ours.add_argument("--model-config", required=True, help="a Llama config.json")
    ours.add_argument("--from-pretrained-kwargs", default=None,
                      help="the hf-trainer export's from_pretrained_kwargs.json")
    ours.add_argument("--seq-len", type=int, default=64,
                      help="standalone only (autoaccel's strategy file sets it)")
    ours.add_argument("--steps", type=int, default=10,
                      help="standalone only: optimizer steps (autoaccel: warm-up + measured)")
    mine, rest = ours.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        ours.print_help()
        print("\nand the TrainingArguments flags (transformers' HfArgumentParser).")
        sys.exit(0)
    # A cpu trial (autoaccel's device type) or no CUDA device: train on the CPU.
    on_cpu = os.environ.get("AUTOACCEL_DEVICE_TYPE", "cuda" if torch.cuda.is_available()
                            else "cpu") == "cpu"
    if on_cpu and "--use_cpu" not in rest:
        rest.append("--use_cpu")
    # Ours first, so a flag the launcher passes again wins; no saving, no logging.
    fixed = ["--report_to=none", "--save_strategy=no", "--logging_strategy=no",
             "--disable_tqdm=true", "--dataloader_num_workers=0", "--seed=0"]
    return mine, fixed + rest


def train(mine, targs, trial, global_batch):
    """Builds the model and the data, trains; returns the Trainer."""
    model_kwargs = {}
    if mine.from_pretrained_kwargs:
        with open(mine.from_pretrained_kwargs, encoding="utf-8") as f:
            model_kwargs = json.load(f)
    if isinstance(model_kwargs.get("dtype"), str):
        model_kwargs["dtype"] = getattr(torch, model_kwargs["dtype"])
    config = AutoConfig.from_pretrained(mine.model_config)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, **model_kwargs)
    trial.report_model(sum(p.numel() for p in model.parameters()))

    data = RandomTokens(trial.total_steps * global_batch, trial.seq_len, config.vocab_size)
    trainer = Trainer(model=model, args=targs, train_dataset=data,
                      callbacks=[AutoaccelCallback(trial)])
    if targs.fsdp and not trainer.is_fsdp_enabled:
        fail("sharding fsdp: the Trainer did not enable FSDP (accelerate %s applies it on "
             "accelerators only; on %s it would silently train as DDP), so this trial cannot "
             "measure fsdp here; tune with --shardings none,zero1,zero2 on CPU"
             % (accelerate_version(), trainer.accelerator.distributed_type.value))
    trainer.add_callback(AppliedSettings(trainer))
    trainer.train()
    return trainer


class AppliedSettings(TrainerCallback):
    """Prints what the Trainer made of the flags when training begins (the
    model is set up then), for the rank's stderr.log: the worker stops a rank
    as soon as its steps are reported, so nothing after training is sure to
    be written."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        print("train.py: rank %d training: %s, mixed precision %s, optim %s, activation "
              "checkpointing %s" % (args.process_index,
                                    self.trainer.accelerator.distributed_type.value,
                                    self.trainer.accelerator.mixed_precision, args.optim.value,
                                    getattr(self.trainer.model, "is_gradient_checkpointing",
                                            False)),
              file=sys.stderr, flush=True)


def main(argv):
    started = time.monotonic()
    mine, hf_argv = parse_args(argv)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    (targs,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(args=hf_argv)
    global_batch = (targs.per_device_train_batch_size * targs.gradient_accumulation_steps
                    * world_size)
    trial = aa.current(standalone=aa.Trial.standalone(
        seq_len=mine.seq_len, global_batch_size=global_batch, measured_steps=mine.steps))
    if trial.active and trial.global_batch_size != global_batch:
        fail("the flags train %d samples per step (per_device_train_batch_size %d x "
             "gradient_accumulation_steps %d x %d ranks) but the trial's global batch is %d; "
             "this script is data-parallel only (tensor and pipeline parallel 1)"
             % (global_batch, targs.per_device_train_batch_size,
                targs.gradient_accumulation_steps, world_size, trial.global_batch_size))
    targs.max_steps = trial.total_steps

    # Out of memory anywhere from the model's build to the last step: an oom event, exit 1.
    with aa.oom_guard(trial):
        trainer = train(mine, targs, trial, global_batch)
    if not trial.active and targs.process_index == 0:
        print("trained %d steps of %d samples x %d tokens in %.1f s"
              % (trial.total_steps, global_batch, trial.seq_len, time.monotonic() - started))
    # End the process group once nothing uses it: a rank that exits with
    # gloo's threads still running may abort ("terminate called without an
    # active exception") on a busy machine.
    del trainer
    gc.collect()
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
