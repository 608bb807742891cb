"""What a training run really applied, read from inside it.

The user scripts beside this file (hf_trainer.py, accelerate_train.py,
deepspeed_train.py) are ordinary training scripts of their framework. Each
calls Probe.watch(model) before training and Probe.report(...) after it: the
probe counts forward passes and optimizer steps, records the batch, autocast
state and weight dtype each forward pass saw, and writes one JSON document
per rank, $AUTOACCEL_PROBE_DIR/rankN.json, which tests/export/run_export.py
reads back and compares with the export's fidelity report and the user's own
arguments."""

import json
import os

import torch


def tiny_model(config_dir, model_kwargs_file=None, **kwargs):
    """The Hugging Face model of config_dir/config.json (no weights: built
    from the config), with from_pretrained's keyword arguments from the
    export's from_pretrained_kwargs.json when given, or as `kwargs`."""
    from transformers import AutoConfig, AutoModelForCausalLM
    if model_kwargs_file:
        with open(model_kwargs_file) as f:
            kwargs = {**json.load(f), **kwargs}
    config = AutoConfig.from_pretrained(config_dir)
    dtype = kwargs.pop("dtype", None)
    model = AutoModelForCausalLM.from_config(config, **kwargs)
    if dtype is not None:
        model = model.to(getattr(torch, dtype))
    return model


class TokenData(torch.utils.data.Dataset):
    """Random token sequences, the same on every rank (seeded)."""

    def __init__(self, vocab_size, seq_len, n=256):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab_size, (n, seq_len), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Probe:
    def __init__(self):
        self.forwards = 0
        self.batches = set()
        self.autocast = set()
        self.weight_dtypes = set()
        self.checkpointed = None
        self.checkpoint_wrappers = 0
        self.optimizer_steps = None
        self.parameters = None
        self.attn_implementation = None

    def watch(self, model):
        """Counts a Hugging Face `model`'s parameters (before any wrapper
        shards them) and watches its token embedding and decoder layers."""
        self.attn_implementation = getattr(model.config, "_attn_implementation", None)

        def checkpointing():
            self.checkpointed = bool(getattr(model, "is_activation_checkpointing", False))
            # FSDP's activation checkpointing wraps layers instead.
            self.checkpoint_wrappers = sum(
                type(m).__name__ == "CheckpointWrapper" for m in model.modules())

        self.watch_parts(model.get_input_embeddings(),
                         [layer.mlp for layer in model.model.layers],
                         sum(p.numel() for p in model.parameters()), checkpointing)

    def watch_parts(self, embedding, mlps, parameters, on_forward=None):
        """Watches a model by its parts: the token embedding (None on a
        rank without one), which runs once per forward pass inside whatever
        the framework wraps the forward in (autocast), and each decoder
        layer's MLP. `parameters`: the model's parameter count;
        `on_forward()` is called at each forward pass."""
        self.parameters = parameters

        def embedding_forward(module, args):
            ids = args[0]
            self.batches.add(int(ids.shape[0]))
            self.forwards += 1
            on = torch.is_autocast_enabled("cpu")
            self.autocast.add(str(torch.get_autocast_dtype("cpu")).replace("torch.", "")
                              if on else "off")
            self.weight_dtypes.add(str(module.weight.dtype).replace("torch.", ""))
            if on_forward is not None:
                on_forward()

        if embedding is not None:
            embedding.register_forward_pre_hook(embedding_forward)

        # Each decoder layer's MLP calls: a checkpointed layer runs its
        # forward again in backward, whichever framework wraps it (around the
        # layer's __call__ or inside its forward), so its MLP runs twice.
        self.layer_calls = []
        for i, mlp in enumerate(mlps):
            self.layer_calls.append(0)

            def mlp_forward(module, args, i=i):
                self.layer_calls[i] += 1

            mlp.register_forward_pre_hook(mlp_forward)

    @staticmethod
    def innermost(optimizer):
        """The optimizer that steps, under the frameworks' wrappers
        (accelerate's, DeepSpeed's ZeRO: .optimizer; torch's
        ZeroRedundancyOptimizer: .optim)."""
        while True:
            inner = getattr(optimizer, "optimizer", None) or getattr(optimizer, "optim", None)
            if inner is None:
                return optimizer
            optimizer = inner

    def count_steps(self, optimizer):
        """Counts the steps the optimizer under `optimizer`'s wrappers really
        takes (DeepSpeed accumulates inside its engine, so a loop's
        iterations are not optimizer steps)."""
        self.optimizer_steps = 0

        def stepped(*_):
            self.optimizer_steps += 1

        self.innermost(optimizer).register_step_post_hook(stepped)

    def report(self, optimizer, steps, **extra):
        """Prints the probe line. `optimizer` is the optimizer the framework
        steps (its param_groups carry the hyperparameters), `steps` the
        optimizer steps taken."""
        groups = optimizer.param_groups

        def one(key):
            """The groups' value of `key`; a sorted list when they differ."""
            values = {json.dumps(g[key]) for g in groups if key in g}
            values = sorted(json.loads(v) for v in values)
            return values[0] if len(values) == 1 else values

        torch_optimizer = self.innermost(optimizer)
        defaults = getattr(torch_optimizer, "defaults", {})
        line = {
            "rank": int(os.environ.get("RANK", "0")),
            "world_size": int(os.environ.get("WORLD_SIZE", "1")),
            "parameters": self.parameters,
            "attn_implementation": self.attn_implementation,
            "forwards": self.forwards,
            "steps": steps,
            "micro_batches": sorted(self.batches),
            "autocast": sorted(self.autocast),
            "weight_dtypes": sorted(self.weight_dtypes),
            "gradient_checkpointing": self.checkpointed,
            "checkpoint_wrappers": self.checkpoint_wrappers,
            # Layers whose forward ran more often than the model's: recomputed.
            "recomputed_layers": sum(c > self.forwards for c in self.layer_calls),
            "layers": len(self.layer_calls),
            "lr": one("lr"),
            "weight_decay": one("weight_decay"),
            "betas": one("betas"),
            "eps": one("eps"),
            "optimizer_class": type(torch_optimizer).__name__,
            "fused": defaults.get("fused"),
            "foreach": defaults.get("foreach"),
        }
        line.update(extra)
        # One file per rank: the launchers interleave their ranks' output.
        path = os.path.join(os.environ["AUTOACCEL_PROBE_DIR"], f"rank{line['rank']}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(line, f)
        os.replace(path + ".tmp", path)


def shut_down():
    """Ends the process group, as a training script should before it exits,
    once the objects that use it (DDP, FSDP, DeepSpeed's engine) are freed:
    a rank that exits with gloo's threads still running, or destroys the group
    under a live DDP, may abort ("terminate called without an active
    exception") on a busy machine."""
    import gc
    gc.collect()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def add_user_arguments(parser, implementation=True):
    """The arguments every user script takes: the optimizer's
    hyperparameters the user chose (run_export.py's USER), the number of
    optimizer steps, and (implementation) which AdamW the fidelity row
    names: fused=True, or foreach=False."""
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--weight-decay", type=float, required=True)
    parser.add_argument("--betas", type=float, nargs=2, required=True)
    parser.add_argument("--eps", type=float, required=True)
    parser.add_argument("--max-steps", type=int, default=2)
    if implementation:
        parser.add_argument("--optimizer", choices=["fused", "foreach_false"], required=True)


def user_optimizer(params, args):
    """torch.optim.AdamW with the user's hyperparameters and the
    implementation of add_user_arguments' --optimizer."""
    implementation = {"fused": True} if args.optimizer == "fused" else {"foreach": False}
    return torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay,
                             betas=tuple(args.betas), eps=args.eps, **implementation)
