"""A plain-PyTorch training script tuned by autoaccel as a black-box launcher trial.

A small decoder-only transformer (written below; random weights, random token
ids) trains with the strategy in $AUTOACCEL_STRATEGY_FILE, read through
autoaccel.trial; autoaccel.trial.run_loop times and reports each optimizer
step. Launched once per rank by the worker (or by torchrun) with the torchrun
variables; standalone, the flags below stand in for the strategy file:

    python train.py --precision bf16 --checkpointing full --steps 5
    torchrun --nproc-per-node=2 train.py --sharding fsdp

How each strategy value is applied (data parallel only: tensor and pipeline
parallel must be 1, so data_parallel = world size):
  sharding none       DistributedDataParallel when world size > 1
  sharding fsdp       FSDP2 fully_shard on every block and the root,
                      reshard_after_forward=True (ZeRO-3: parameters gathered
                      per block for forward and again for backward)
  sharding zero2      fully_shard with reshard_after_forward=False: parameters,
                      gradients and optimizer state sharded at rest, but each
                      block's parameters stay gathered from forward to backward
                      (ZeRO-2's communication; more memory at rest saved than
                      ZeRO-2, since parameters are sharded between steps too)
  sharding zero1      the same as zero2: FSDP2 cannot shard only the optimizer
                      state, so zero1 is approximated by zero2 here
  precision           fp32; bf16 / fp16: torch.autocast (fp16 with a
                      GradScaler, which under fully_shard checks only this
                      rank's gradient shard for inf/nan); pure_bf16: bf16 weights and autocast-free
                      compute, AdamW on the bf16 weights (no fp32 master copy)
  checkpointing       torch.utils.checkpoint on the first checkpoint_percent %
                      of the blocks: full = the whole block, selective = the
                      attention core (scores, softmax, weighted sum)
  attention           math = matmul/softmax spelled out, sdpa =
                      F.scaled_dot_product_attention
  optimizer           adamw = torch.optim.AdamW(foreach=False) (one parameter at
                      a time), fused_adamw = AdamW(fused=True) (runs on CPU in
                      torch 2.11)
  micro_batch_size, grad_accum_steps
                      micro-batches of that size per optimizer step, gradients
                      synchronised on the last one only (DDP no_sync, FSDP2
                      set_requires_gradient_sync(False))
  offload             only "none" (anything else exits 2)
Settings it cannot run exit with status 2 and the reason on stderr, which the
worker records as a FAILED trial.
"""

import argparse
import math
import os
import sys
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from autoaccel import trial as aa


def fail(message):
    print("train.py: " + message, file=sys.stderr)
    sys.exit(2)


class Attention(nn.Module):
    def __init__(self, hidden, heads, sdpa, checkpoint_core):
        super().__init__()
        self.heads, self.sdpa, self.checkpoint_core = heads, sdpa, checkpoint_core
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)

    def core(self, q, k, v):
        if self.sdpa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        n = q.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v

    def forward(self, x):
        b, n, h = x.shape
        q, k, v = (t.view(b, n, self.heads, h // self.heads).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        if self.checkpoint_core and torch.is_grad_enabled():
            y = checkpoint(self.core, q, k, v, use_reentrant=False)
        else:
            y = self.core(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, n, h))


class Block(nn.Module):
    def __init__(self, hidden, heads, sdpa, checkpointing):
        super().__init__()
        self.full = checkpointing == "full"
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn = Attention(hidden, heads, sdpa, checkpointing == "selective")
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(),
                                 nn.Linear(4 * hidden, hidden))

    def body(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))

    def forward(self, x):
        if self.full and torch.is_grad_enabled():
            return checkpoint(self.body, x, use_reentrant=False)
        return self.body(x)


class Decoder(nn.Module):
    def __init__(self, vocab, hidden, heads, layers, seq_len, sdpa, checkpointing, percent):
        super().__init__()
        checkpointed = math.ceil(layers * percent / 100) if checkpointing != "none" else 0
        self.embed = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq_len, hidden)
        self.blocks = nn.ModuleList(
            Block(hidden, heads, sdpa, checkpointing if i < checkpointed else "none")
            for i in range(layers))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


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
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    strategy = {"data_parallel": world, "tensor_parallel": 1, "pipeline_parallel": 1,
                "sharding": a.sharding, "micro_batch_size": a.micro_batch_size,
                "grad_accum_steps": a.grad_accum_steps, "precision": a.precision,
                "checkpointing": a.checkpointing, "checkpoint_percent": a.checkpoint_percent,
                "attention": a.attention, "optimizer": a.optimizer, "offload": "none"}
    return aa.Trial.standalone(strategy=strategy, seq_len=a.seq_len,
                               global_batch_size=a.micro_batch_size * a.grad_accum_steps * world,
                               measured_steps=a.steps)


def main(argv):
    trial = aa.current(standalone=standalone_trial(argv))
    s = trial.strategy
    mbs, ga = int(s.get("micro_batch_size", 1)), int(s.get("grad_accum_steps", 1))
    sharding = s.get("sharding", "none")
    precision = s.get("precision", "fp32")
    if s.get("tensor_parallel", 1) != 1 or s.get("pipeline_parallel", 1) != 1:
        fail("only data parallelism: tensor_parallel and pipeline_parallel must be 1 (got %s)"
             % trial.strategy_text)
    if s.get("offload", "none") != "none":
        fail("offload %s is not supported by this example (only none)" % s.get("offload"))
    if mbs * ga * trial.world_size != trial.global_batch_size:
        fail("micro_batch_size %d x grad_accum_steps %d x world size %d != global batch %d"
             % (mbs, ga, trial.world_size, trial.global_batch_size))

    device_type = trial.device_type if trial.device_type in ("cpu", "cuda") else None
    if device_type is None:
        fail("device type %s: this example drives cpu and cuda only" % trial.device_type)
    device = torch.device(device_type, trial.local_rank if device_type == "cuda" else None)
    if device_type == "cuda":
        torch.cuda.set_device(device)
    distributed = trial.world_size > 1
    if distributed:
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo", device_id=(
            device if device_type == "cuda" else None))

    torch.manual_seed(0)  # the same initial weights on every rank
    model = Decoder(vocab=512, hidden=64, heads=4, layers=2, seq_len=trial.seq_len,
                    sdpa=s.get("attention", "sdpa") == "sdpa",
                    checkpointing=s.get("checkpointing", "none"),
                    percent=int(s.get("checkpoint_percent", 100)))
    trial.report_model(sum(p.numel() for p in model.parameters()))
    if precision == "pure_bf16":
        model = model.to(torch.bfloat16)
    model = model.to(device)

    sharded = distributed and sharding != "none"
    if sharded:
        from torch.distributed.fsdp import fully_shard
        reshard = sharding == "fsdp"  # zero1 / zero2: keep gathered from forward to backward
        for block in model.blocks:
            fully_shard(block, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        train_model = model
    elif distributed:
        train_model = nn.parallel.DistributedDataParallel(model)
    else:
        train_model = model

    fused = s.get("optimizer", "adamw") == "fused_adamw"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4,
                                  **({"fused": True} if fused else {"foreach": False}))
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler(device_type) if precision == "fp16" else None
    generator = torch.Generator().manual_seed(1000 + trial.rank)

    def micro_batch_context(last):
        if last or not distributed:
            return nullcontext()
        if sharded:
            model.set_requires_gradient_sync(False)
            return nullcontext()
        return train_model.no_sync()

    def step(_):
        total = 0.0
        if sharded:
            model.set_requires_gradient_sync(True)
        for m in range(ga):
            ids = torch.randint(0, 512, (mbs, trial.seq_len + 1), generator=generator).to(device)
            last = m == ga - 1
            with micro_batch_context(last):
                if sharded and last:
                    model.set_requires_gradient_sync(True)
                with torch.autocast(device_type, dtype=autocast_dtype,
                                    enabled=autocast_dtype is not None):
                    logits = train_model(ids[:, :-1])
                    loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
                (scaler.scale(loss / ga) if scaler else loss / ga).backward()
            total += loss.detach()
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return total / ga

    times = aa.run_loop(step, trial)
    if times:
        print("train.py: rank %d trained %d steps (%s, %s), median step %.3f s"
              % (trial.rank, len(times), "FSDP2 fully_shard" if sharded else
                 "DDP" if distributed else "one process", precision,
                 sorted(times)[len(times) // 2]), file=sys.stderr)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
