"""Apply a tuned strategy to your own PyTorch model.

    model, optimizer, step = autoaccel.torch.apply(strategy, model, optimizer_fn)
    for batch in batches:            # this rank's micro_batch_size x grad_accum_steps samples
        loss = step(batch)           # forward + backward of every micro-batch, one optimizer step

`strategy` is any form autoaccel.strategy.parse() reads: the strategy's JSON
object (a job's answer, `client.best(...)`, a launcher trial's
strategy.json), its canonical text, a path to a strategy.json, or an
autoaccel.trial.Trial. `model` is a plain nn.Module (a Hugging Face
PreTrainedModel gets more: see below); `optimizer_fn(params, fused=BOOL)`
builds its optimizer (`torch.optim.AdamW` or a functools.partial of it
works), or a dict of AdamW's keyword arguments. apply() returns an Applied
that unpacks to (model, optimizer, step):

  model      the module to call: DistributedDataParallel around yours, or
             yours sharded in place by FSDP2 / DTensor
  optimizer  what optimizer_fn built (over the fp32 master copies with
             pure_bf16 or offload cpu; a ZeroRedundancyOptimizer with zero1);
             give it to an LR scheduler, never step it yourself
  step       step(batch) -> the mean loss over this rank's micro-batches (a
             detached fp32 tensor); `step(micro_batches=[...])` takes them
             already split

How each strategy value is applied ("blocks" are the model's repeated
layers: a Hugging Face model's decoder/encoder layers, else `blocks=`, else
the one nn.ModuleList of same-class modules the model has):

  data_parallel > 1, sharding
    none    DistributedDataParallel; with grad_accum_steps > 1 gradients are
            all-reduced after the last micro-batch only (no_sync before)
    zero1   DistributedDataParallel + ZeroRedundancyOptimizer: each rank
            keeps the optimizer state of its share of the parameters (whole
            parameters, not slices; with pure_bf16/offload the fp32 master
            copies stay whole on every rank)
    zero2   FSDP2 fully_shard per block and the root with
            reshard_after_forward=False: gradients reduce-scattered after
            every micro-batch and optimizer state sharded, as ZeRO-2; but
            FSDP2 also shards the parameters between steps (gathered once
            per micro-batch forward and kept to its backward), which ZeRO-2
            does not
    fsdp    FSDP2 fully_shard per block and the root, reshard_after_forward
            =True (ZeRO-3: parameters gathered for forward and again for
            backward), gradients reduce-scattered after every micro-batch
  tensor_parallel > 1
            DTensor parallelize_module over a ("dp", "tp") mesh (tp fastest,
            as the engine numbers ranks) with the plan the Hugging Face model
            declares (its config's base_model_tp_plan and the model's
            _tp_plan: colwise / rowwise / *_rep / colwise_gather_output /
            embedding_*; a tied embedding stays whole); a model without one,
            or a style with no DTensor equivalent, is refused. The optimizer
            steps the parameters' local tensors. With data_parallel > 1 only
            sharding zero2 / fsdp (FSDP2 over the dp mesh dimension)
  precision
    fp32    nothing
    bf16    torch.autocast(bfloat16) around forward and loss; fp32 weights
    fp16    torch.autocast(float16) and a GradScaler (ShardedGradScaler on
            several ranks: every rank skips the same steps)
    pure_bf16
            the parameters in bfloat16 (buffers keep their dtype), no
            autocast; the optimizer steps fp32 master copies of them, which
            are copied back (rounded) after every step -- the engine's
            semantics (engine/optim.h)
  checkpointing, checkpoint_percent
            the first ceil(blocks x percent / 100) blocks: full = the whole
            block recomputed in backward (torch.utils.checkpoint,
            use_reentrant=False; a Hugging Face GradientCheckpointingLayer
            through its own switch); selective = the attention core only
            (scores, softmax, weighted sum), through transformers' attention
            interface, so Hugging Face models only
  attention math / sdpa
            a Hugging Face model's attn_implementation "eager" / "sdpa"
            (set_attn_implementation); other models through `set_attention=
            fn(model, "math"|"sdpa")`, else refused
  optimizer adamw / fused_adamw
            optimizer_fn(params, fused=False / True); refused when the
            optimizer it returns does not say so in its defaults
  offload cpu
            the optimizer steps fp32 master copies kept in CPU memory
            (gradients copied there, the updated values copied back): the
            optimizer state lives on the CPU, as in the engine
  micro_batch_size, grad_accum_steps
            step(batch) splits the batch (micro_batch_size x grad_accum_steps
            samples along dim 0) into grad_accum_steps micro-batches; each
            loss is divided by grad_accum_steps before backward
  pipeline_parallel > 1, sequence_parallel, context_parallel > 1,
  expert_parallel > 1, precision fp8
            refused (UnsupportedStrategy)

Anything the strategy asks that cannot be applied raises UnsupportedStrategy
(a ValueError) saying what and why; nothing is silently skipped. A strategy
that is malformed raises ValueError naming the key.

With tensor or data parallelism the ranks must be started as torchrun does
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK); apply() starts the
default process group (gloo on cpu, nccl on cuda) unless it exists, and its
world size must be data_parallel x tensor_parallel. A group apply() started
is destroyed at exit, after the garbage collector has freed the DDP / FSDP
wrappers that hold it.

(One module of ~800 lines: a user reads it as the one place that says what
each strategy value does to their model; its wrappers are private to apply.)
"""

import atexit
import contextlib
import functools
import gc
import math
import os
import sys
from collections.abc import Mapping

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

from autoaccel import strategy as _strategy

__all__ = ["Applied", "Step", "UnsupportedStrategy", "apply", "find_blocks"]


class UnsupportedStrategy(ValueError):
    """The strategy asks for something autoaccel.torch cannot apply to this
    model, or at all (pipeline or sequence parallelism). The message names
    the strategy key and the reason."""


class Applied:
    """What apply() returns: unpacks to (model, optimizer, step).

    Attributes: `model`, `optimizer`, `step` (a Step), `strategy` (the parsed
    dict), `device`, `dp_rank`, `dp_size`, `tp_rank`, `tp_size`, `mesh` (the
    DeviceMesh, or None on one rank), `blocks` (the model's repeated layers as
    found), `applied` (one line per strategy dimension saying what was done;
    for logs), `parameters` (the model's parameter count before sharding)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __iter__(self):
        return iter((self.model, self.optimizer, self.step))

    def __repr__(self):
        return "Applied(%s)" % _strategy.to_text(self.strategy)

    def autocast(self):
        """The strategy's autocast context (for evaluation outside step)."""
        return self.step.autocast()


def apply(strategy, model, optimizer_fn, *, loss_fn=None, blocks=None, set_attention=None,
          device=None):
    """Applies `strategy` to `model` and builds its optimizer; see the
    module's docstring for what each dimension becomes.

    strategy      anything autoaccel.strategy.parse() reads
    model         an nn.Module (on CPU or already on `device`); changed in
                  place (dtype, device, sharding, checkpointing, attention)
    optimizer_fn  callable(params, fused=bool) -> torch.optim.Optimizer, or a
                  dict of torch.optim.AdamW keyword arguments (lr, ...)
    loss_fn       callable(model, micro_batch) -> scalar loss; default: a
                  dict micro-batch -> model(**mb).loss (Hugging Face); a pair
                  (input, target) -> mean cross-entropy of the logits against
                  target (ignore_index -100), in fp32; a tensor [B, T+1] of
                  token ids -> the same with input [:, :-1], target [:, 1:]
    blocks        the model's repeated layers (a list or nn.ModuleList), when
                  they cannot be found (see find_blocks)
    set_attention callable(model, "math" | "sdpa") for a model that is not a
                  Hugging Face model
    device        torch.device or string; default: the Trial's device_type
                  when `strategy` is an autoaccel.trial.Trial, else cuda
                  (LOCAL_RANK's) when available, else cpu

    Raises ValueError for a malformed strategy, UnsupportedStrategy for one
    that cannot be applied (before anything collective when it can tell;
    every rank raises the same)."""
    s = _strategy.parse(strategy)
    text = _strategy.to_text(s)
    dp, tp = s["data_parallel"], s["tensor_parallel"]
    if s["pipeline_parallel"] > 1:
        raise UnsupportedStrategy(
            "strategy.pipeline_parallel=%d: autoaccel.torch runs no pipeline stages (train with "
            "a pipeline framework, e.g. torchtitan or Megatron-LM: autoaccel export)"
            % s["pipeline_parallel"])
    if s["sequence_parallel"]:
        raise UnsupportedStrategy(
            "strategy.sequence_parallel: autoaccel.torch does not split activations along the "
            "sequence (Hugging Face tensor-parallel plans carry no sequence-parallel layout for "
            "every layer); use sequence_parallel false")
    if s["context_parallel"] > 1:
        raise UnsupportedStrategy(
            "strategy.context_parallel=%d: autoaccel.torch does not split sequences over ranks "
            "(train with a framework that does, e.g. torchtitan or Megatron-LM: autoaccel export)"
            % s["context_parallel"])
    if s["expert_parallel"] > 1:
        raise UnsupportedStrategy(
            "strategy.expert_parallel=%d: autoaccel.torch does not spread experts over ranks "
            "(train with a framework that does, e.g. torchtitan or Megatron-LM: autoaccel export)"
            % s["expert_parallel"])
    if s["precision"] == "fp8":
        raise UnsupportedStrategy(
            "strategy.precision=fp8: autoaccel.torch has no fp8 linear layers (train with a "
            "framework that has them, e.g. Megatron-LM, torchtitan or accelerate: autoaccel "
            "export)")
    if not isinstance(model, nn.Module):
        raise TypeError("model: expected a torch.nn.Module, got %s" % type(model).__name__)
    name = type(model).__name__
    hf = _is_hf(model)
    device = _resolve_device(device, strategy)
    lines = []

    # Everything that can be refused without touching the model or the
    # process group is checked first, identically on every rank.
    found = list(blocks) if blocks is not None else find_blocks(model)
    needs_blocks = s["checkpointing"] != "none" or s["sharding"] in ("zero2", "fsdp")
    if needs_blocks and not found:
        raise UnsupportedStrategy(
            "%s: %s needs the model's repeated layers and none were found in %s (pass blocks=...)"
            % ("strategy.checkpointing" if s["checkpointing"] != "none" else "strategy.sharding",
               s["checkpointing"] if s["checkpointing"] != "none" else s["sharding"], name))
    if s["checkpointing"] == "selective" and not hf:
        raise UnsupportedStrategy(
            "strategy.checkpointing=selective: recomputing the attention core goes through "
            "transformers' attention interface, and %s is not a Hugging Face PreTrainedModel "
            "(use full, or none)" % name)
    if not hf and set_attention is None:
        raise UnsupportedStrategy(
            "strategy.attention=%s: %s is not a Hugging Face model, so autoaccel.torch cannot "
            "choose its attention kernel; pass set_attention=fn(model, 'math'|'sdpa')"
            % (s["attention"], name))
    tp_plan = None
    if tp > 1:
        tp_plan = _hf_tp_plan(model)
        if dp > 1 and s["sharding"] in ("none", "zero1"):
            raise UnsupportedStrategy(
                "strategy.sharding=%s with tensor_parallel=%d and data_parallel=%d: data "
                "parallelism over tensor-parallel (DTensor) parameters runs through FSDP2 only "
                "here; use sharding zero2 or fsdp" % (s["sharding"], tp, dp))
    if s["precision"] in ("bf16", "pure_bf16") and device.type == "cuda" and \
            not torch.cuda.is_bf16_supported():
        raise UnsupportedStrategy("strategy.precision=%s: %s has no bfloat16 support"
                                  % (s["precision"], torch.cuda.get_device_name(device)))
    fused = s["optimizer"] == "fused_adamw"
    build = _optimizer_builder(optimizer_fn)
    probe = torch.nn.Parameter(torch.zeros(1, device=device))
    _check_fused(build([probe], fused), fused, s["optimizer"])  # optimizer_fn passes fused on
    if s["offload"] == "cpu" and s["sharding"] == "zero1" and device.type != "cpu":
        raise UnsupportedStrategy(
            "strategy.offload=cpu with sharding zero1: ZeroRedundancyOptimizer broadcasts the "
            "CPU master copies over the %s process group, which cannot carry CPU tensors; use "
            "zero2 or fsdp" % device.type)

    world = dp * tp
    if world > 1:
        _init_process_group(device, world, text)
    else:
        started = dist.get_world_size() if dist.is_initialized() else \
            int(os.environ.get("WORLD_SIZE", "1") or 1)
        if started != 1:
            raise ValueError("strategy %s runs on one rank, but %d were started (WORLD_SIZE)"
                             % (text, started))
    rank = dist.get_rank() if world > 1 else 0
    dp_rank, tp_rank = rank // tp, rank % tp
    mesh = None
    if world > 1 and (tp > 1 or s["sharding"] in ("zero2", "fsdp")):
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh(device.type, (dp, tp), mesh_dim_names=("dp", "tp"))

    parameters = sum(p.numel() for p in model.parameters())
    model.train()

    # Attention kernel.
    want = {"math": "eager", "sdpa": "sdpa"}[s["attention"]]
    if hf:
        _set_hf_attention(model, want, s["attention"])
        lines.append("attention %s: attn_implementation %r" % (s["attention"], want))
        if getattr(model.config, "use_cache", False):
            model.config.use_cache = False  # training keeps no KV cache (checkpointing needs it)
    else:
        set_attention(model, s["attention"])
        lines.append("attention %s: set_attention" % s["attention"])

    # Precision of the weights, then the device.
    if s["precision"] == "pure_bf16":
        with torch.no_grad():
            for p in model.parameters():
                if p.is_floating_point():
                    p.data = p.data.to(torch.bfloat16)
        lines.append("precision pure_bf16: parameters in bfloat16, fp32 master copies stepped")
    model.to(device)

    # Activation checkpointing of the first ceil(n * pct / 100) blocks.
    if s["checkpointing"] != "none":
        count = math.ceil(len(found) * s["checkpoint_percent"] / 100)
        chosen = found[:count]
        if s["checkpointing"] == "full":
            for block in chosen:
                _checkpoint_block(block)
        else:
            _checkpoint_attention_core(model, chosen, want)
        lines.append("checkpointing %s: %d of %d blocks (%d%%)"
                     % (s["checkpointing"], count, len(found), s["checkpoint_percent"]))

    # Tensor parallelism.
    if tp > 1:
        from torch.distributed.tensor.parallel import parallelize_module
        parallelize_module(model, mesh["tp"], tp_plan)
        lines.append("tensor_parallel %d: parallelize_module with %s's plan (%d entries)"
                     % (tp, name, len(tp_plan)))

    # Data parallelism.
    train_model = model
    sharded = s["sharding"] in ("zero2", "fsdp") and dp > 1
    ddp = None
    if sharded:
        from torch.distributed.fsdp import fully_shard
        reshard = s["sharding"] == "fsdp"
        for block in found:
            fully_shard(block, mesh=mesh["dp"], reshard_after_forward=reshard)
        fully_shard(model, mesh=mesh["dp"], reshard_after_forward=reshard)
        lines.append("sharding %s: FSDP2 fully_shard on %d blocks and the root, "
                     "reshard_after_forward=%s" % (s["sharding"], len(found), reshard))
    elif dp > 1:
        ddp = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
        train_model = ddp
        lines.append("sharding %s: DistributedDataParallel over %d ranks%s"
                     % (s["sharding"], dp, ", ZeroRedundancyOptimizer" if s["sharding"] == "zero1"
                        else ""))

    # Optimizer, over fp32 master copies when the strategy has them.
    params = [p for p in model.parameters() if p.requires_grad]
    masters = None
    if s["precision"] == "pure_bf16" or s["offload"] == "cpu":
        masters = _MasterCopies(params, torch.device("cpu") if s["offload"] == "cpu" else device)
        params = masters.masters
        if s["offload"] == "cpu":
            lines.append("offload cpu: fp32 master copies and optimizer state in CPU memory")
    elif tp > 1:
        masters = _MasterCopies(params)  # the optimizer steps the local tensors
        params = masters.masters
    if s["sharding"] == "zero1" and dp > 1:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        optimizer = ZeroRedundancyOptimizer(params, optimizer_class=_OptimizerClass(build, fused))
        _check_fused(optimizer.optim, fused, s["optimizer"])
    else:
        optimizer = build(params, fused)
        _check_fused(optimizer, fused, s["optimizer"])
    lines.append("optimizer %s: %s(fused=%s)" % (s["optimizer"], type(optimizer).__name__, fused))

    scaler = None
    if s["precision"] == "fp16":
        if world > 1:
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
            scaler = ShardedGradScaler(device.type)
        else:
            scaler = torch.amp.GradScaler(device.type)
        lines.append("precision fp16: autocast float16, %s" % type(scaler).__name__)
    elif s["precision"] == "bf16":
        lines.append("precision bf16: autocast bfloat16, fp32 weights")
    lines.append("micro batches: grad_accum_steps %d x micro_batch_size %d per optimizer step on "
                 "each of %d data-parallel ranks" % (s["grad_accum_steps"], s["micro_batch_size"],
                                                     dp))

    step = Step(train_model, optimizer, strategy=s, device=device, loss_fn=loss_fn or _default_loss,
                scaler=scaler, masters=masters, ddp=ddp, fsdp=model if sharded else None)
    return Applied(model=train_model, optimizer=optimizer, step=step, strategy=s, device=device,
                   dp_rank=dp_rank, dp_size=dp, tp_rank=tp_rank, tp_size=tp, mesh=mesh,
                   blocks=found, applied=lines, parameters=parameters)


class Step:
    """One optimizer step of the applied strategy: step(batch) or
    step(micro_batches=[...]). Returns the mean of the micro-batches' losses on
    this rank (a detached fp32 tensor on the device; average it over the
    data-parallel ranks yourself when you need the global mean)."""

    def __init__(self, model, optimizer, *, strategy, device, loss_fn, scaler, masters, ddp,
                 fsdp):
        self.model, self.optimizer, self.strategy, self.device = model, optimizer, strategy, device
        self.loss_fn, self.scaler, self.masters = loss_fn, scaler, masters
        self._ddp, self._fsdp = ddp, fsdp
        self._dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(strategy["precision"])

    def autocast(self):
        if self._dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self._dtype)

    def __call__(self, batch=None, *, micro_batches=None):
        mbs, ga = self.strategy["micro_batch_size"], self.strategy["grad_accum_steps"]
        if (batch is None) == (micro_batches is None):
            raise TypeError("step: pass either a batch or micro_batches")
        if micro_batches is None:
            micro_batches = _split(batch, mbs, ga)
        elif len(micro_batches) != ga:
            raise ValueError("step: %d micro-batches given, the strategy has grad_accum_steps=%d"
                             % (len(micro_batches), ga))
        self.model.zero_grad(set_to_none=True)
        total = torch.zeros((), dtype=torch.float32, device=self.device)
        for i, micro in enumerate(micro_batches):
            last = i == ga - 1
            micro = _to_device(micro, self.device)
            if self._fsdp is not None:
                # zero2/fsdp reduce-scatter after every micro-batch, so that
                # only gradient shards are kept (the engine's ZeRO-2/3).
                context = contextlib.nullcontext()
            elif self._ddp is not None and not last:
                context = self._ddp.no_sync()
            else:
                context = contextlib.nullcontext()
            with context:
                with self.autocast():
                    loss = self.loss_fn(self.model, micro)
                scaled = loss / ga
                (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
            total += loss.detach().float()
        if self.masters is not None:
            self.masters.gradients_in()
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        if self.masters is not None:
            self.masters.values_out()
        return total / ga


def find_blocks(model):
    """The model's repeated layers, in order: a Hugging Face model's
    GradientCheckpointingLayer modules (its decoder or encoder layers), else
    the modules of its one nn.ModuleList whose entries share one class.
    Empty when neither is found (or several such lists exist)."""
    try:
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:  # no transformers: only the generic rule
        GradientCheckpointingLayer = None
    if GradientCheckpointingLayer is not None:
        layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
        if layers:
            return layers
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) > 0
             and len({type(x) for x in m}) == 1]
    return list(lists[0]) if len(lists) == 1 else []


# ---- pieces


def _is_hf(model):
    transformers = sys.modules.get("transformers")
    if transformers is None:
        return False
    return isinstance(model, transformers.PreTrainedModel)


def _resolve_device(device, strategy):
    if device is not None:
        device = torch.device(device)
    else:
        kind = getattr(strategy, "device_type", None)
        if kind is None:
            kind = "cuda" if torch.cuda.is_available() else "cpu"
        if kind not in ("cpu", "cuda"):
            raise UnsupportedStrategy("device type %s: autoaccel.torch drives cpu and cuda" % kind)
        device = torch.device(kind)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def _init_process_group(device, world, text):
    if not dist.is_initialized():
        if "WORLD_SIZE" not in os.environ:
            raise ValueError("strategy %s needs %d ranks: start them with torchrun (or as an "
                             "autoaccel launcher), or init_process_group first" % (text, world))
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                device_id=device if device.type == "cuda" else None)
        atexit.register(_end_process_group)
    if dist.get_world_size() != world:
        raise ValueError("strategy %s needs data_parallel x tensor_parallel = %d ranks, the "
                         "process group has %d" % (text, world, dist.get_world_size()))


def _end_process_group():
    """At exit, for the process group apply() started: first free what still
    holds it (DDP's reducer, FSDP2's and ZeroRedundancyOptimizer's state are
    often in reference cycles, which only the collector frees), then destroy
    it. The other order -- destroy, then the wrappers freed during interpreter
    teardown -- aborts gloo ranks now and then ("terminate called without an
    active exception")."""
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def _set_hf_attention(model, want, name):
    if model.config._attn_implementation != want:
        model.set_attn_implementation(want)
    if model.config._attn_implementation != want:
        raise UnsupportedStrategy("strategy.attention=%s: %s keeps attn_implementation %r (it "
                                  "cannot switch to %r)" % (name, type(model).__name__,
                                                            model.config._attn_implementation,
                                                            want))


def _checkpoint_block(block):
    """Recompute `block` in backward. A Hugging Face GradientCheckpointingLayer
    has its own switch (it checkpoints forward, not __call__, so FSDP2's hooks
    stay outside, and drops the KV cache); any other module gets its forward
    wrapped the same way."""
    checkpoint = functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)
    if _is_hf_layer(block):
        block.gradient_checkpointing = True
        block._gradient_checkpointing_func = checkpoint
        return
    inner = block.forward

    def forward(*args, **kwargs):
        if not torch.is_grad_enabled():
            return inner(*args, **kwargs)
        return checkpoint(inner, *args, **kwargs)

    block.forward = forward


def _is_hf_layer(block):
    layers = sys.modules.get("transformers.modeling_layers")
    return layers is not None and isinstance(block, layers.GradientCheckpointingLayer)


def _checkpoint_attention_core(model, blocks, implementation):
    """Selective checkpointing: the attention function transformers calls
    inside each attention module (eager's matmul/softmax/matmul, or SDPA)
    runs under torch.utils.checkpoint in the chosen blocks. Done by
    registering a wrapping implementation, "autoaccel_selective_<impl>", in
    transformers' AttentionInterface (with the mask function of <impl>) and
    switching the model to it."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    chosen = set()
    for block in blocks:
        chosen.update(id(m) for m in block.modules())
    name = "autoaccel_selective_" + implementation
    plain = ALL_ATTENTION_FUNCTIONS["sdpa"] if implementation == "sdpa" else None
    checkpoint = functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)

    def attention(module, query, key, value, attention_mask, **kwargs):
        core = plain
        if core is None:  # the model's own eager function, beside its attention class
            core = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
            if core is None:
                raise UnsupportedStrategy(
                    "strategy.checkpointing=selective: %s's module has no eager_attention_forward"
                    " to recompute" % type(module).__name__)
        if id(module) in chosen and torch.is_grad_enabled():
            return checkpoint(functools.partial(core, module, **kwargs), query, key, value,
                              attention_mask)
        return core(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(name, attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, ALL_MASK_ATTENTION_FUNCTIONS[implementation])
    model.set_attn_implementation(name)
    if model.config._attn_implementation != name:
        raise UnsupportedStrategy(
            "strategy.checkpointing=selective: %s does not take a registered attention "
            "implementation, so its attention core cannot be recomputed" % type(model).__name__)


_TP_STYLES = ("colwise", "rowwise", "colwise_rep", "rowwise_rep", "colwise_gather_output",
              "rowwise_split_input", "embedding_rowwise", "embedding_colwise")


def _hf_tp_plan(model):
    """The DTensor plan (module path -> ParallelStyle) of the tensor-parallel
    plan a Hugging Face model declares. UnsupportedStrategy for a model
    without one or a style without a DTensor equivalent."""
    name = type(model).__name__
    if not _is_hf(model):
        raise UnsupportedStrategy(
            "strategy.tensor_parallel: %s is not a Hugging Face model; autoaccel.torch shards "
            "with the tensor-parallel plan a transformers model declares (base_model_tp_plan)"
            % name)
    # transformers merges the config's base_model_tp_plan (prefixed with the
    # base model's attribute) and the head's _tp_plan into model._tp_plan.
    plan = dict(getattr(model, "_tp_plan", None) or {})
    if not plan:
        base_plan = getattr(model.config, "base_model_tp_plan", None) or {}
        prefix = getattr(model, "base_model_prefix", "")
        has_base = bool(prefix) and getattr(model, prefix, None) is not None
        plan = {(prefix + "." + k) if has_base else k: v for k, v in base_plan.items()}
    if not plan:
        raise UnsupportedStrategy(
            "strategy.tensor_parallel: %s declares no tensor-parallel plan (no "
            "base_model_tp_plan in its config); use tensor_parallel 1" % name)
    # A tied embedding is one parameter for two modules that the plan would
    # shard differently: both stay whole (replicated).
    whole = set()
    if getattr(model.config, "tie_word_embeddings", False):
        modules = {m: n for n, m in model.named_modules()}
        for get in ("get_input_embeddings", "get_output_embeddings"):
            module = getattr(model, get, lambda: None)()
            if module is not None and module in modules:
                whole.add(modules[module])
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    out = {}
    for key, style in plan.items():
        if key in whole:
            continue
        if style not in _TP_STYLES:
            raise UnsupportedStrategy(
                "strategy.tensor_parallel: %s's plan shards %s as %r, which autoaccel.torch has "
                "no DTensor style for (it applies %s)" % (name, key, style, ", ".join(_TP_STYLES)))
        if style == "colwise":
            out[key] = ColwiseParallel()
        elif style == "rowwise":
            out[key] = RowwiseParallel()
        elif style in ("colwise_rep", "colwise_gather_output"):
            out[key] = ColwiseParallel(output_layouts=Replicate())
        elif style in ("rowwise_rep", "rowwise_split_input"):
            out[key] = RowwiseParallel(input_layouts=Replicate())
        elif style == "embedding_rowwise":
            out[key] = RowwiseParallel(input_layouts=Replicate())
        else:  # embedding_colwise
            out[key] = ColwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())
    return out


def _optimizer_builder(optimizer_fn):
    if isinstance(optimizer_fn, Mapping):
        kwargs = dict(optimizer_fn)
        if "fused" in kwargs:
            raise ValueError("optimizer_fn: leave 'fused' out; the strategy's optimizer sets it")
        # adamw steps one parameter at a time (foreach=False), as the engine's.
        return lambda params, fused: torch.optim.AdamW(
            params, fused=fused, **({} if fused or "foreach" in kwargs else {"foreach": False}),
            **kwargs)
    if not callable(optimizer_fn):
        raise TypeError("optimizer_fn: expected callable(params, fused=bool) or a dict of AdamW "
                        "arguments, got %s" % type(optimizer_fn).__name__)
    return lambda params, fused: optimizer_fn(params, fused=fused)


class _OptimizerClass:
    """ZeroRedundancyOptimizer wants an optimizer class and its keyword
    arguments; this stands in for the class, building the local optimizer
    with optimizer_fn."""

    def __init__(self, build, fused):
        self._build, self._fused = build, fused
        self.__name__ = "optimizer_fn"

    def __call__(self, params, **_):
        return self._build(params, self._fused)


def _check_fused(optimizer, fused, name):
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("optimizer_fn returned %s, not a torch.optim.Optimizer"
                        % type(optimizer).__name__)
    got = bool(optimizer.defaults.get("fused"))
    if got != fused:
        raise UnsupportedStrategy(
            "strategy.optimizer=%s: optimizer_fn returned %s with fused=%s; it must pass its "
            "`fused` argument on"
            % (name, type(optimizer).__name__, optimizer.defaults.get("fused")))


class _MasterCopies:
    """The tensors the optimizer steps in place of the parameters.

    With `device` (pure_bf16, offload cpu): fp32 copies of the parameters
    (this rank's shards of DTensors) on `device`; gradients_in() copies the
    parameters' gradients into the copies' .grad (as fp32), values_out()
    copies the updated values back into the parameters (rounded to their
    dtype) -- engine/optim.h's TrainingOptimizer with master copies.

    Without (tensor parallelism): the parameters' local tensors themselves,
    so that the optimizer's foreach and fused kernels see plain tensors
    rather than a mix of DTensors (the sharded layers) and tensors (the
    replicated ones), which they refuse; gradients_in() points their .grad at
    the local gradients and the update lands in the parameters directly."""

    def __init__(self, params, device=None):
        self.params = list(params)
        self.copies = device is not None
        with torch.no_grad():
            if self.copies:
                self.masters = [_local(p).detach().to(device, torch.float32, copy=True)
                                .requires_grad_(True) for p in self.params]
            else:
                self.masters = [_local(p).detach() for p in self.params]

    def gradients_in(self):
        with torch.no_grad():
            for p, m in zip(self.params, self.masters):
                if p.grad is None:
                    m.grad = None  # the optimizer skips it, as the engine does
                elif not self.copies:
                    m.grad = _local_gradient(p)
                elif m.grad is None:
                    m.grad = _local_gradient(p).to(m.device, torch.float32, copy=True)
                else:
                    m.grad.copy_(_local_gradient(p))

    def values_out(self):
        if not self.copies:
            return
        with torch.no_grad():
            for p, m in zip(self.params, self.masters):
                if m.grad is not None:
                    _local(p).copy_(m)


def _local(t):
    """This rank's part of a DTensor (the tensor itself otherwise); a view
    that in-place writes go through to."""
    to_local = getattr(t, "to_local", None)
    if to_local is None:
        return t
    with torch.no_grad():
        return to_local()


def _local_gradient(p):
    """This rank's part of p's gradient, laid out as p: a DTensor gradient
    may come with other placements than its parameter (a vocabulary-parallel
    embedding's is Partial, not Shard), so it is redistributed first."""
    grad = p.grad
    placements = getattr(p, "placements", None)
    if placements is not None and tuple(grad.placements) != tuple(placements):
        grad = grad.redistribute(p.device_mesh, placements)
    return _local(grad)


def _split(batch, mbs, ga):
    n = _batch_size(batch)
    if n != mbs * ga:
        raise ValueError("step: the batch has %d samples, the strategy's micro_batch_size %d x "
                         "grad_accum_steps %d = %d per rank" % (n, mbs, ga, mbs * ga))
    return [_slice(batch, i * mbs, mbs) for i in range(ga)]


def _batch_size(batch):
    if isinstance(batch, torch.Tensor):
        return batch.shape[0]
    if isinstance(batch, Mapping):
        sizes = {_batch_size(v) for v in batch.values() if isinstance(v, (torch.Tensor, Mapping))}
    elif isinstance(batch, (tuple, list)):
        sizes = {_batch_size(v) for v in batch if isinstance(v, (torch.Tensor, Mapping, tuple,
                                                                   list))}
    else:
        raise TypeError("step: a batch is a tensor, a dict or a tuple of them, got %s"
                        % type(batch).__name__)
    if len(sizes) != 1:
        raise ValueError("step: the batch's tensors disagree on its size (dim 0): %s"
                         % sorted(sizes))
    return sizes.pop()


def _slice(batch, start, length):
    if isinstance(batch, torch.Tensor):
        return batch.narrow(0, start, length)
    if isinstance(batch, Mapping):
        return {k: _slice(v, start, length) if isinstance(v, (torch.Tensor, Mapping, tuple, list))
                else v for k, v in batch.items()}
    return type(batch)(_slice(v, start, length) if isinstance(v, (torch.Tensor, Mapping, tuple,
                                                                    list)) else v for v in batch)


def _to_device(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_to_device(v, device) for v in batch)
    return batch


def _default_loss(model, micro):
    if isinstance(micro, Mapping):
        out = model(**micro)
        loss = getattr(out, "loss", None)
        if loss is None:
            raise ValueError("step: the model returned no .loss for a dict micro-batch (give it "
                             "labels, or pass loss_fn)")
        return loss
    if isinstance(micro, (tuple, list)) and len(micro) == 2:
        inputs, target = micro
    elif isinstance(micro, torch.Tensor):
        inputs, target = micro[:, :-1], micro[:, 1:]
    else:
        raise TypeError("step: the default loss takes a dict, an (input, target) pair or a "
                        "[B, T+1] tensor of token ids; pass loss_fn for anything else")
    out = model(inputs)
    logits = getattr(out, "logits", None)
    if logits is None:
        logits = out[0] if isinstance(out, (tuple, list)) else out
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), target.reshape(-1),
                           ignore_index=-100)
