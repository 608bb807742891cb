"""One rank of a tiny transformers Llama trained by autoaccel.torch.apply, for
test_torch_apply's tensor-parallel checks (GPT-2 declares no tensor-parallel
plan, so the engine comparison cannot cover it): the same initial weights
(torch.manual_seed(0)) and the same global batch on every layout, each
data-parallel rank taking its rows, so that a tensor-parallel run must follow
the single-rank one.

usage: apply_llama.py STRATEGY_TEXT tied|untied OUT.json   (torchrun for > 1 rank)
Writes {"step_losses": [...], "applied": [...]} from rank 0: the mean loss
over the global batch at each of 5 steps."""

import json
import sys

import torch
import torch.distributed as dist
import transformers

import autoaccel.torch as aat


def main(text, tied, out):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=64, max_position_embeddings=32,
        tie_word_embeddings=tied == "tied")
    applied = aat.apply(text, transformers.LlamaForCausalLM(config), {"lr": 1e-3},
                        device="cpu")
    _, _, step = applied
    s = applied.strategy
    per_rank = s["micro_batch_size"] * s["grad_accum_steps"]
    tokens = torch.randint(0, 64, (per_rank * applied.dp_size, 17),
                           generator=torch.Generator().manual_seed(5))
    rows = tokens[applied.dp_rank * per_rank:(applied.dp_rank + 1) * per_rank]
    losses = []
    for _ in range(5):
        loss = step(rows)
        if dist.is_initialized():  # the tensor-parallel ranks of a replica agree
            dist.all_reduce(loss)
            loss /= dist.get_world_size()
        losses.append(loss.item())
    if not dist.is_initialized() or dist.get_rank() == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"step_losses": losses, "applied": applied.applied}, f)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
