"""The engine's GPT-2 trial, rebuilt in Python for autoaccel.torch.

autoaccel-trial (engine/trainer.cc) trains a GPT-2 built from a config with
Hugging Face's initialisation drawn from a CPU generator seeded with the trial's
seed (engine/gpt.cc), on one fixed synthetic global batch (SyntheticTokens,
seeded seed + 1: a random start token per sequence, then a fixed random
permutation of the vocabulary), each data-parallel rank taking its rows, with
AdamW (lr 1e-3, weight decay 0.01). Torch's CPU generator and kernels are the
ones LibTorch runs, so this module reproduces the engine's initial weights and
data bit for bit on a transformers GPT2LMHeadModel:

  model = engine_gpt2.model(config, seed)       # GPT2LMHeadModel, the engine's weights
  tokens = engine_gpt2.batch(config, global_batch, seq_len, seed)   # [B, T + 1]
  rows = engine_gpt2.rank_rows(tokens, dp_rank, mbs, ga)

and `run()` is one rank of a comparison run (see test_torch_apply.py).
"""

import json
import math
import sys

import torch

# transformers' Conv1D stores [in, out]; the engine's nn.Linear [out, in], the
# layout its generator filled.
_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def model(config, seed):
    """GPT2LMHeadModel of the engine's config (a config.json dict) with the
    engine's initial weights for `seed`; dropout off (the engine has none)."""
    import transformers
    cfg = dict(config)
    cfg.pop("model_type", None)
    hf = transformers.GPT2Config(**cfg, attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
                                 bos_token_id=None, eos_token_id=None)
    m = transformers.GPT2LMHeadModel(hf)
    gen = torch.Generator().manual_seed(seed)
    proj_std = 0.02 / math.sqrt(2.0 * hf.n_layer)
    with torch.no_grad():
        # named_parameters() order is the engine's: wte, wpe, h.N.{ln_1, attn.c_attn,
        # attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, ln_f (the LM head is wte).
        for name, p in m.transformer.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
            elif "ln_" in name:
                p.fill_(1.0)
            else:
                std = proj_std if "c_proj.weight" in name else 0.02
                if name.endswith(_CONV1D):
                    t = torch.empty(p.shape[1], p.shape[0])
                    t.normal_(0.0, std, generator=gen)
                    p.copy_(t.t())
                else:
                    p.normal_(0.0, std, generator=gen)
    return m


def batch(config, global_batch, seq_len, seed):
    """The engine's fixed global batch: [global_batch, seq_len + 1] int64."""
    gen = torch.Generator().manual_seed(seed + 1)
    vocab = config["vocab_size"]
    perm = torch.randperm(vocab, generator=gen)
    tokens = torch.empty(global_batch, seq_len + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(vocab, (global_batch,), generator=gen)
    for t in range(1, seq_len + 1):
        tokens[:, t] = perm[tokens[:, t - 1]]
    return tokens


def rank_rows(tokens, dp_rank, mbs, ga):
    """This data-parallel rank's rows, as the engine splits the global batch."""
    per_rank = mbs * ga
    return tokens[dp_rank * per_rank:(dp_rank + 1) * per_rank]


def run(spec_file, out_file):
    """One rank: reads a TrialSpec JSON (the engine's input), trains its model
    with autoaccel.torch.apply of its strategy for warmup + measured steps on
    the same data, and writes {"step_losses": [...], "applied": [...]} (the
    mean loss over the global batch, as the engine reports it) from rank 0."""
    import torch.distributed as dist
    import autoaccel.torch as aat

    with open(spec_file, encoding="utf-8") as f:
        spec = json.load(f)
    torch.set_num_threads(int(spec.get("num_threads", 1)))
    seed = int(spec.get("seed", 1234))
    s = spec["strategy"]
    m = model(spec["model_config"], seed)
    applied = aat.apply(s, m, {"lr": 1e-3, "weight_decay": 0.01}, device="cpu")
    _, _, step = applied
    strategy = applied.strategy
    tokens = batch(spec["model_config"], spec["global_batch_size"], spec["seq_len"], seed)
    rows = rank_rows(tokens, applied.dp_rank, strategy["micro_batch_size"],
                     strategy["grad_accum_steps"])
    losses = []
    for _ in range(spec.get("warmup_steps", 2) + spec.get("measured_steps", 5)):
        loss = step(rows)
        if applied.dp_size > 1:
            dist.all_reduce(loss)
            loss /= dist.get_world_size()
        losses.append(loss.item())
    # apply() started the process group and ends it at exit.
    if not dist.is_initialized() or dist.get_rank() == 0:
        with open(out_file, "w", encoding="utf-8") as f:
            json.dump({"step_losses": losses, "applied": applied.applied}, f)


def _without_master_copies():
    """The negative control of test_torch_apply: pure_bf16 with the optimizer
    stepping the bf16 weights themselves (no fp32 master copies)."""
    import autoaccel.torch as aat

    class NoMasterCopies(aat._MasterCopies):
        def __init__(self, params, device=None):
            super().__init__(params, None)

    aat._MasterCopies = NoMasterCopies


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--without-master-copies":
        _without_master_copies()
        args = args[1:]
    if len(args) != 2:
        sys.exit("usage: engine_gpt2.py [--without-master-copies] SPEC.json OUT.json")
    run(*args)
