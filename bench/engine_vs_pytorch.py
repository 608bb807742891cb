#!/usr/bin/env python3
"""Our trial runner vs. an eager PyTorch training loop, side by side.

For each strategy, trains the same GPT-2 (Hugging Face GPT2LMHeadModel built
from the same config, random weights, dropout off) with the same global batch,
micro-batching, precision and attention kernel, on the same device and thread
count, in two ways:
  * ours:    build/bin/autoaccel-trial (LibTorch C++), one process per run;
  * pytorch: an eager Python loop in this process (AdamW, same hyper-parameters;
             fused_adamw is torch.optim.AdamW(fused=True); pure_bf16 keeps an fp32
             master copy that a second AdamW updates, as our runner does; fp16
             uses torch.amp.GradScaler).
Runs alternate (ours, pytorch, ours, ...) so that machine noise hits both, and
the median step time of each run gives tokens/s. Prints one row per strategy
with the median ratio ours/pytorch over the repeats (> 1.0: we are faster).

This is a benchmark, not a test: it asserts nothing. Usage:
  .venv/bin/python bench/engine_vs_pytorch.py [--device cpu|cuda] [--threads 1]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (micro_batch_size, precision, checkpointing, attention, optimizer); grad
# accumulation fills the global batch.
DEFAULT_STRATEGIES = [
    (8, "fp32", "none", "math", "adamw"),
    (8, "fp32", "none", "sdpa", "adamw"),
    (8, "fp32", "none", "sdpa", "fused_adamw"),
    (4, "bf16", "none", "sdpa", "adamw"),
    (4, "bf16", "none", "sdpa", "fused_adamw"),
    (4, "pure_bf16", "none", "sdpa", "fused_adamw"),
    (8, "fp32", "full", "sdpa", "adamw"),
]
# fp16 GEMMs are emulated on most CPUs (orders of magnitude slower): GPU only.
CUDA_ONLY_STRATEGIES = [
    (4, "fp16", "none", "sdpa", "fused_adamw"),
]


def synthetic_tokens(vocab, n, length, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(vocab, (n, length), generator=g)


def pytorch_run(cfg, args, mbs, precision, checkpointing, attention, optimizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(1234)
    config = GPT2Config(n_layer=cfg["n_layer"], n_embd=cfg["n_embd"], n_head=cfg["n_head"],
                        vocab_size=cfg["vocab_size"], n_positions=cfg["n_positions"],
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=None, eos_token_id=None, use_cache=False)
    config._attn_implementation = "sdpa" if attention == "sdpa" else "eager"
    model = GPT2LMHeadModel(config)
    device = torch.device(args.device)
    model.to(device).train()
    if checkpointing == "full":
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable({"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable({"use_reentrant": False})
    fused = optimizer == "fused_adamw"
    params = list(model.parameters())
    masters = None
    if precision == "pure_bf16":
        model.to(torch.bfloat16)
        params = list(model.parameters())
        masters = [p.detach().float().clone().requires_grad_(True) for p in params]
    opt = torch.optim.AdamW(masters if masters else params, lr=1e-3, weight_decay=0.01,
                            fused=fused, foreach=False if not fused else None)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    autocast_dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    ga = args.global_batch // mbs
    tokens = synthetic_tokens(cfg["vocab_size"], args.global_batch, args.seq_len + 1, 1235)
    micro = [(tokens[i * mbs:(i + 1) * mbs, :-1].to(device), tokens[i * mbs:(i + 1) * mbs, 1:].to(device))
             for i in range(ga)]
    times = []
    for step in range(args.warmup + args.steps):
        sync(device)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for inp, tgt in micro:
            with torch.autocast(device.type, dtype=autocast_dtype,
                                enabled=precision in ("bf16", "fp16")):
                logits = model(input_ids=inp).logits
            loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), tgt.flatten())
            if scaler:
                scaler.scale(loss / ga).backward()
            else:
                (loss / ga).backward()
        if masters:
            for p, m in zip(params, masters):
                m.grad = p.grad.float()
            opt.step()
            with torch.no_grad():
                for p, m in zip(params, masters):
                    p.copy_(m)
            for m in masters:
                m.grad = None
        elif scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        sync(device)
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    return args.global_batch * args.seq_len / statistics.median(times)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def ours_run(cfg, args, mbs, precision, checkpointing, attention, optimizer, workdir):
    spec = {
        "trial_id": "bench", "model_family": "gpt2", "model_config": cfg,
        "seq_len": args.seq_len, "global_batch_size": args.global_batch,
        "strategy": {"micro_batch_size": mbs, "grad_accum_steps": args.global_batch // mbs,
                     "precision": precision, "checkpointing": checkpointing,
                     "attention": attention, "optimizer": optimizer},
        "warmup_steps": args.warmup, "measured_steps": args.steps,
        "device": args.device if args.device == "cpu" else "cuda:0",
        "num_threads": args.threads,
    }
    spec_path = os.path.join(workdir, "spec.json")
    result_path = os.path.join(workdir, "result.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    subprocess.run([args.runner, "--spec", spec_path, "--result", result_path], check=True,
                   stderr=subprocess.DEVNULL)
    with open(result_path) as f:
        result = json.load(f)
    if result["status"] != "SUCCEEDED":
        raise RuntimeError(f"trial {result['status']}: {result['error']}")
    return result["metrics"]["tokens_per_second"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runner", default=os.path.join(ROOT, "build/bin/autoaccel-trial"))
    p.add_argument("--config", default=os.path.join(ROOT, "deploy/examples/gpt2-small.json"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--global-batch", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only", nargs="*", default=[],
                   help="run only strategies whose fields contain one of these words")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    with open(args.config) as f:
        cfg = {k: v for k, v in json.load(f).items() if k != "model_type"}

    print(f"# engine_vs_pytorch: gpt2 {cfg}, seq {args.seq_len}, global batch {args.global_batch}, "
          f"device {args.device}, threads {args.threads}, torch {torch.__version__}, "
          f"{args.repeats} alternating repeats of {args.warmup}+{args.steps} steps")
    print(f"{'strategy':56s} {'ours tok/s':>11s} {'pytorch tok/s':>14s} {'ratio':>7s}")
    strategies = DEFAULT_STRATEGIES + (CUDA_ONLY_STRATEGIES if args.device == "cuda" else [])
    if args.only:
        strategies = [s for s in strategies if any(o in ",".join(map(str, s)) for o in args.only)]
    with tempfile.TemporaryDirectory() as workdir:
        for strategy in strategies:
            ours, theirs, ratios = [], [], []
            for _ in range(args.repeats):
                o = ours_run(cfg, args, *strategy, workdir)
                t = pytorch_run(cfg, args, *strategy)
                ours.append(o)
                theirs.append(t)
                ratios.append(o / t)
            mbs, precision, ckpt, attention, optimizer = strategy
            name = f"mbs={mbs},{precision},ckpt={ckpt},{attention},{optimizer}"
            print(f"{name:56s} {statistics.median(ours):11.0f} {statistics.median(theirs):14.0f} "
                  f"{statistics.median(ratios):7.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
