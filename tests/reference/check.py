#!/usr/bin/env python3
"""Checks the engine's models against Hugging Face transformers.

For tiny GPT-2, Llama (grouped-query and multi-query/tied variants,
Llama 3.1 rope scaling with biases, YaRN, dynamic NTK), Mixtral (with and
without the auxiliary load-balancing loss), Mistral,
Qwen2, Qwen3, Phi-3 (and its LongRoPE, long and short factors),
Gemma, Gemma 2, Qwen3-MoE (with and without the auxiliary loss), DeepSeek-V3,
GPT-OSS (attention sinks, with and without the auxiliary loss) and BERT configs made by transformers' own config classes,
builds the transformers model from the config alone (random
weights, nothing downloaded), in fp32 with eager attention and no dropout,
then scales its weights up so that every part of the network visibly moves
the output (transformers' N(0, 0.02) init leaves attention almost uniform,
which would hide a wrong position encoding). The weights and a fixed token
batch go to the C++ side (autoaccel-reference, engine/reference_main.cc) as
safetensors files; it loads them by name and writes back logits, loss and
the gradients of one backward pass, which must agree with transformers':

  logits:    max |cpp - hf| <= 1e-4
  loss:      |cpp - hf| <= 1e-4
  gradients: per tensor, max |cpp - hf| <= 1e-4 * max |hf| + 1e-6
             (relative to the tensor's own scale, so that it means the same
             for large and small gradients; the 1e-6 floor only matters for
             a tensor whose gradient is ~0)

and the parameter count must equal transformers' num_parameters() both as
ModelSpec::ParameterCount() computes it and as the built module has it.

Each configuration runs with math attention and no checkpointing, and with
SDPA and full activation checkpointing (RUNS lists the exceptions: Gemma 2's
soft-capped attention and GPT-OSS's attention sinks run on the math kernel
only, as transformers refuses SDPA for both). Negative controls must fail,
so the comparison is shown to be able to fail: one weight perturbed by 1e-3
before it goes to C++, and for the sliding window, the attention soft-cap and
each rope scaling the engine given the config without the feature
(FEATURE_CONTROLS), and DeepSeek-V3's router correction biases and GPT-OSS's
attention sinks zeroed (ZERO_CONTROLS).

usage: check.py --runner PATH/autoaccel-reference [--workdir DIR] [--verbose]
Exit status 0 when everything agrees, 1 otherwise.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

try:
    import torch
    import transformers
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
except ImportError as e:  # a clear message rather than a traceback
    sys.exit(f"check.py: {e}; run scripts/setup (it installs torch and transformers into .venv)")

LOGITS_TOL = 1e-4
LOSS_TOL = 1e-4
GRAD_RTOL = 1e-4
GRAD_ATOL = 1e-6

BATCH, SEQ_LEN, VOCAB = 2, 16, 96

# (attention, checkpointing) runs of each case: math with nothing recomputed,
# and SDPA with full recomputation, unless the case says otherwise.
DEFAULT_RUNS = (("math", "none"), ("sdpa", "full"))
RUNS = {
    "gemma2": (("math", "none"), ("math", "full")),
    "gemma2-sdpa": (("sdpa", "selective"),),
    "mistral": (("math", "selective"), ("sdpa", "full")),
    # Attention sinks: math only (the attention_kernel rule); selective
    # recomputation differentiates the sinks through the checkpointed core.
    "gpt-oss": (("math", "none"), ("math", "selective")),
    "gpt-oss-aux": (("math", "none"), ("math", "full")),
}

# Phi-3 128k-style rope (longrope) for a head of 8 with half of it rotary:
# 2 frequencies, each with its own short and long factor.
PHI3_SHORT, PHI3_LONG = [1.0, 1.7], [3.0, 9.5]
PHI3_LONGROPE = {"rope_type": "longrope", "rope_theta": 100.0, "partial_rotary_factor": 0.5,
                 "short_factor": PHI3_SHORT, "long_factor": PHI3_LONG}
# YaRN for a head of 12 (6 frequencies): theta, the pretraining length and
# the betas chosen so that the ramp runs over dimensions 0..4 (kept,
# ramped, interpolated); DeepSeek's mscale / mscale_all_dim attention factor.
LLAMA_YARN = {"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0, "beta_fast": 8.0,
              "beta_slow": 0.5, "mscale": 2.0, "mscale_all_dim": 0.5,
              "original_max_position_embeddings": 64}

# DeepSeek-V3's YaRN (rotary size 4: 2 frequencies) with mscale and
# mscale_all_dim set and unequal: cos and sin scaled by their ratio, the
# softmax by mscale_all_dim's factor squared.
DEEPSEEK_YARN = {"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0, "beta_fast": 8.0,
                 "beta_slow": 0.5, "mscale": 1.0, "mscale_all_dim": 0.7,
                 "original_max_position_embeddings": 8}
DEEPSEEK_YARN_ATTENTION_FACTOR = (0.1 * 1.0 * math.log(4.0) + 1) / (0.1 * 0.7 * math.log(4.0) + 1)

# Features whose absence must change the answer: the case run with the key
# set to this value (the feature off) has to fail the comparison.
FEATURE_CONTROLS = {
    "mistral": [("sliding_window", None)],
    "gemma2": [("attn_logit_softcapping", None)],
    "llama31-bias": [("rope_parameters", {"rope_type": "default", "rope_theta": 100.0})],
    # YaRN's frequencies, and its attention factor on cos and sin.
    "llama-yarn": [("rope_parameters", {"rope_type": "default", "rope_theta": 100.0}),
                   ("rope_parameters", {**LLAMA_YARN, "attention_factor": 1.0})],
    # The base left as it is: max_position_embeddings up to the sequence (a
    # default rope would refuse a sequence past max_position_embeddings).
    "llama-dynamic": [("max_position_embeddings", SEQ_LEN)],
    # The auxiliary load-balancing loss at all.
    "mixtral-aux": [("output_router_logits", False)],
    "qwen3-moe-aux": [("output_router_logits", False)],
    # LongRoPE at all; and that the sequence length picks the factors: the
    # long ones above the pretraining length, the short ones below it.
    "phi3-longrope": [("rope_parameters", {"rope_type": "default", "rope_theta": 100.0,
                                           "partial_rotary_factor": 0.5}),
                      ("rope_parameters", {**PHI3_LONGROPE, "long_factor": PHI3_SHORT})],
    "phi3-lrope-short": [("rope_parameters", {**PHI3_LONGROPE, "short_factor": PHI3_LONG})],
    # The top-k weights kept as the softmax gave them, and renormalised.
    "qwen3-moe": [("norm_topk_prob", True)],
    "qwen3-moe-window": [("use_sliding_window", False), ("norm_topk_prob", False)],
    # Interleaved rotary pairs; the routed experts' scale; the group limit
    # (every group allowed); mscale_all_dim on the softmax scale (cos and sin
    # keep their attention factor).
    "deepseek-v3": [("rope_interleave", False), ("routed_scaling_factor", 1.0),
                    ("topk_group", 4),
                    ("rope_parameters", {**DEEPSEEK_YARN, "mscale_all_dim": 0.0,
                                         "attention_factor": DEEPSEEK_YARN_ATTENTION_FACTOR})],
    "deepseek-v3-noq": [("norm_topk_prob", True)],
    # The clamp (1.5 here, so that it bites; 7 is the default) and the
    # sigmoid's gain of the experts' SwiGLU; the sliding window of layer 0.
    "gpt-oss": [("swiglu_limit", 7.0), ("swiglu_alpha", 1.0),
                ("layer_types", ["full_attention", "full_attention"])],
    "gpt-oss-aux": [("output_router_logits", False)],
}

# Buffers or parameters that must matter: the case run with those whose
# name ends so zeroed has to fail.
ZERO_CONTROLS = {"deepseek-v3": "e_score_correction_bias", "gpt-oss": "self_attn.sinks"}

# GPT-2's Conv1D layers store [in, out]; the engine uses nn.Linear's [out, in].
GPT2_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def configs():
    """(name, family, transformers model class, config) for every case."""
    no_dropout_gpt2 = dict(attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
    llama_sizes = dict(hidden_size=32, intermediate_size=56, num_hidden_layers=2,
                       num_attention_heads=4, vocab_size=VOCAB, max_position_embeddings=32,
                       rms_norm_eps=1e-5, attention_dropout=0.0, pad_token_id=None,
                       bos_token_id=None, eos_token_id=None)
    return [
        ("gpt2", "gpt2", transformers.GPT2LMHeadModel,
         transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB,
                                 n_positions=32, bos_token_id=None, eos_token_id=None,
                                 **no_dropout_gpt2)),
        # Grouped-query attention (2 key/value heads for 4 query heads), a
        # non-default rope_theta, untied LM head.
        ("llama", "llama", transformers.LlamaForCausalLM,
         transformers.LlamaConfig(num_key_value_heads=2, rope_theta=1000.0,
                                  tie_word_embeddings=False, **llama_sizes)),
        # Multi-query attention (one key/value head), tied embeddings.
        ("llama-mqa-tied", "llama", transformers.LlamaForCausalLM,
         transformers.LlamaConfig(num_key_value_heads=1, tie_word_embeddings=True,
                                  **llama_sizes)),
        ("mixtral", "mixtral", transformers.MixtralForCausalLM,
         transformers.MixtralConfig(num_key_value_heads=2, rope_theta=1000.0,
                                    num_local_experts=4, num_experts_per_tok=2,
                                    sliding_window=None, router_jitter_noise=0.0,
                                    **llama_sizes)),
        # The auxiliary load-balancing loss added (output_router_logits),
        # with a coefficient large enough that its gradient visibly moves
        # the routers' and everything below them.
        ("mixtral-aux", "mixtral", transformers.MixtralForCausalLM,
         transformers.MixtralConfig(num_key_value_heads=2, num_local_experts=4,
                                    num_experts_per_tok=2, sliding_window=None,
                                    router_jitter_noise=0.0, output_router_logits=True,
                                    router_aux_loss_coef=0.3, **llama_sizes)),
        # Llama 3.1's rope scaling (theta and the pretraining length chosen so
        # that the tiny head's frequencies fall in all three of its regimes:
        # kept, interpolated, stretched), q/k/v/o and MLP biases, and a head
        # size (12) that is not hidden / heads (8).
        ("llama31-bias", "llama", transformers.LlamaForCausalLM,
         transformers.LlamaConfig(num_key_value_heads=2, head_dim=12, attention_bias=True,
                                  mlp_bias=True,
                                  rope_parameters={"rope_type": "llama3", "rope_theta": 100.0,
                                                   "factor": 4.0, "low_freq_factor": 1.0,
                                                   "high_freq_factor": 2.0,
                                                   "original_max_position_embeddings": 16},
                                  **llama_sizes)),
        # YaRN (LLAMA_YARN), its attention factor on cos and sin.
        ("llama-yarn", "llama", transformers.LlamaForCausalLM,
         transformers.LlamaConfig(num_key_value_heads=2, head_dim=12,
                                  rope_parameters=dict(LLAMA_YARN), **llama_sizes)),
        # Dynamic NTK: transformers grows the base when the forward is longer
        # than max_position_embeddings (not original_max_position_embeddings,
        # which it does not read), so 12 < the 16-token sequence.
        ("llama-dynamic", "llama", transformers.LlamaForCausalLM,
         transformers.LlamaConfig(num_key_value_heads=2,
                                  rope_parameters={"rope_type": "dynamic", "rope_theta": 100.0,
                                                   "factor": 3.0},
                                  **dict(llama_sizes, max_position_embeddings=12))),
        # LongRoPE (Phi-3 128k) on half of each head: the sequence (16) longer
        # than the pretraining length (8, Phi3Config's top-level key), so the
        # long factors; then longer than the sequence, the short ones. The
        # attention factor from max / original positions.
        ("phi3-longrope", "phi3", transformers.Phi3ForCausalLM,
         transformers.Phi3Config(num_key_value_heads=2, rope_parameters=dict(PHI3_LONGROPE),
                                 original_max_position_embeddings=8, resid_pdrop=0.0,
                                 embd_pdrop=0.0, **llama_sizes)),
        ("phi3-lrope-short", "phi3", transformers.Phi3ForCausalLM,
         transformers.Phi3Config(num_key_value_heads=2, rope_parameters=dict(PHI3_LONGROPE),
                                 original_max_position_embeddings=24, resid_pdrop=0.0,
                                 embd_pdrop=0.0, **llama_sizes)),
        # Sliding-window attention over every layer, the window (6) shorter
        # than the sequence (16).
        ("mistral", "mistral", transformers.MistralForCausalLM,
         transformers.MistralConfig(num_key_value_heads=2, sliding_window=6, **llama_sizes)),
        # q/k/v biases; layer 1 slides (use_sliding_window from
        # max_window_layers 1 on), layer 0 attends to everything.
        ("qwen2", "qwen2", transformers.Qwen2ForCausalLM,
         transformers.Qwen2Config(num_key_value_heads=2, use_sliding_window=True,
                                  sliding_window=5, max_window_layers=1, **llama_sizes)),
        # q/k RMSNorm per head, head_dim 12 != 32 / 4, tied embeddings.
        ("qwen3", "qwen3", transformers.Qwen3ForCausalLM,
         transformers.Qwen3Config(num_key_value_heads=2, head_dim=12, tie_word_embeddings=True,
                                  **llama_sizes)),
        # Fused qkv_proj (grouped-query: unequal q, k, v blocks) and
        # gate_up_proj, rotary on half of each head.
        ("phi3", "phi3", transformers.Phi3ForCausalLM,
         transformers.Phi3Config(num_key_value_heads=2,
                                 rope_parameters={"rope_theta": 10000.0,
                                                  "partial_rotary_factor": 0.5},
                                 resid_pdrop=0.0, embd_pdrop=0.0, **llama_sizes)),
        # (1 + w) norms, embedding x sqrt(hidden), GeGLU (tanh), head_dim 12,
        # multi-query attention, tied embeddings.
        ("gemma", "gemma", transformers.GemmaForCausalLM,
         transformers.GemmaConfig(num_key_value_heads=1, head_dim=12, **llama_sizes)),
        # Gemma 2: sandwich norms, attention and final logit soft-capping
        # (caps small enough to bend these logits), query_pre_attn_scalar,
        # sliding (layer 0, window 6) and global (layer 1) attention. Math
        # attention only: sdpa cannot soft-cap (checked by gemma2-sdpa).
        ("gemma2", "gemma2", transformers.Gemma2ForCausalLM,
         transformers.Gemma2Config(num_key_value_heads=2, head_dim=12, sliding_window=6,
                                   attn_logit_softcapping=3.0, final_logit_softcapping=2.0,
                                   query_pre_attn_scalar=10, **llama_sizes)),
        ("gemma2-sdpa", "gemma2", transformers.Gemma2ForCausalLM,
         transformers.Gemma2Config(num_key_value_heads=2, head_dim=12, sliding_window=6,
                                   attn_logit_softcapping=None, final_logit_softcapping=2.0,
                                   query_pre_attn_scalar=10, **llama_sizes)),
        # Experts of their own width (24) beside a dense layer (1, from
        # mlp_only_layers) of intermediate_size (56); the top-2 weights not
        # renormalised (norm_topk_prob false); qwen3's q/k norms, head_dim 12.
        ("qwen3-moe", "qwen3_moe", transformers.Qwen3MoeForCausalLM,
         transformers.Qwen3MoeConfig(num_key_value_heads=2, head_dim=12, num_experts=4,
                                     num_experts_per_tok=2, moe_intermediate_size=24,
                                     mlp_only_layers=[1], norm_topk_prob=False,
                                     **dict(llama_sizes, num_hidden_layers=3))),
        # The same with the auxiliary loss: its rows are the tokens of the two
        # expert layers only.
        ("qwen3-moe-aux", "qwen3_moe", transformers.Qwen3MoeForCausalLM,
         transformers.Qwen3MoeConfig(num_key_value_heads=2, head_dim=12, num_experts=4,
                                     num_experts_per_tok=2, moe_intermediate_size=24,
                                     mlp_only_layers=[1], norm_topk_prob=False,
                                     output_router_logits=True, router_aux_loss_coef=0.3,
                                     **dict(llama_sizes, num_hidden_layers=3))),
        # decoder_sparse_step 2 (layer 0 dense, 1 experts), renormalised
        # weights, every layer's window 6 (use_sliding_window).
        ("qwen3-moe-window", "qwen3_moe", transformers.Qwen3MoeForCausalLM,
         transformers.Qwen3MoeConfig(num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                                     moe_intermediate_size=24, decoder_sparse_step=2,
                                     norm_topk_prob=True, use_sliding_window=True,
                                     sliding_window=6, **llama_sizes)),
        # Latent attention with a query bottleneck (16), latent 12, heads of
        # 8 + 4 (rotary, interleaved) and values of 6, YaRN with mscale_all_dim;
        # layer 0 dense, then 8 experts of 16 in 4 groups (the best 2 allowed),
        # top 3, 2 shared experts, scaled by 2.5; random correction biases.
        ("deepseek-v3", "deepseek_v3", transformers.DeepseekV3ForCausalLM,
         transformers.DeepseekV3Config(num_key_value_heads=4, q_lora_rank=16, kv_lora_rank=12,
                                       qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6,
                                       n_routed_experts=8, n_group=4, topk_group=2,
                                       num_experts_per_tok=3, moe_intermediate_size=16,
                                       first_k_dense_replace=1, n_shared_experts=2,
                                       routed_scaling_factor=2.5,
                                       rope_parameters=dict(DEEPSEEK_YARN),
                                       **dict(llama_sizes, num_hidden_layers=3))),
        # q_proj (no query bottleneck), attention biases, rotate_half rotary,
        # weights not renormalised, every layer experts (one group).
        ("deepseek-v3-noq", "deepseek_v3", transformers.DeepseekV3ForCausalLM,
         transformers.DeepseekV3Config(num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=12,
                                       qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6,
                                       n_routed_experts=4, n_group=1, topk_group=1,
                                       num_experts_per_tok=2, moe_intermediate_size=16,
                                       first_k_dense_replace=0, n_shared_experts=1,
                                       norm_topk_prob=False, attention_bias=True,
                                       rope_interleave=False,
                                       rope_parameters={"rope_type": "default",
                                                        "rope_theta": 100.0},
                                       **llama_sizes)),
        # Attention sinks; layer 0 slides (window 6 < the 16 tokens), layer 1
        # attends to everything; GptOssConfig's default YaRN; q/k/v/o biases;
        # 4 experts of 16 (top 2 of the biased router's logits, then the
        # softmax), clamped SwiGLU with a limit low enough to clamp.
        ("gpt-oss", "gpt_oss", transformers.GptOssForCausalLM,
         transformers.GptOssConfig(num_key_value_heads=2, head_dim=12, num_local_experts=4,
                                   num_experts_per_tok=2, sliding_window=6, swiglu_limit=1.5,
                                   **dict(llama_sizes, intermediate_size=16))),
        # The auxiliary load-balancing loss (router logits with the router's
        # bias); no attention biases, a default rope, every layer full,
        # top 3 of 4 experts.
        ("gpt-oss-aux", "gpt_oss", transformers.GptOssForCausalLM,
         transformers.GptOssConfig(num_key_value_heads=1, head_dim=8, num_local_experts=4,
                                   num_experts_per_tok=3, attention_bias=False,
                                   layer_types=["full_attention"] * 2,
                                   rope_parameters={"rope_type": "default", "rope_theta": 100.0},
                                   output_router_logits=True, router_aux_loss_coef=0.3,
                                   **dict(llama_sizes, intermediate_size=16))),
        ("bert", "bert", transformers.BertForMaskedLM,
         transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, vocab_size=VOCAB,
                                 max_position_embeddings=32, type_vocab_size=2,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                 pad_token_id=None)),
    ]


def scale_up_weights(model, hidden_size, seed):
    """Weights of O(1) effect: matrices N(0, 1/hidden), vectors ~N(0, 0.1)
    (norm weights around 1). Tied parameters are drawn once."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if p.dim() >= 2:
                p.copy_(noise / hidden_size ** 0.5)
            elif ("norm" in name.lower() or ".ln_" in name) and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * noise)
            else:
                p.copy_(0.1 * noise)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):  # comparable to sigmoid scores
                b.copy_(0.3 * torch.randn(b.shape, generator=gen))


def engine_name(family, hf_name):
    """transformers' parameter name -> the engine's, and whether to transpose."""
    if family == "gpt2":
        name = hf_name.removeprefix("transformer.")
        return name, name.endswith(GPT2_CONV1D)
    return hf_name, False


def make_batch(family, seed):
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ_LEN + 1), generator=gen)
    if family != "bert":
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    # Masked LM: about 15% of positions replaced by the last id, the only
    # positions with a target.
    sequence = tokens[:, :-1]
    masked = torch.rand(sequence.shape, generator=gen) < 0.15
    masked[:, 0] = True  # at least one per row
    return (torch.where(masked, VOCAB - 1, sequence).contiguous(),
            torch.where(masked, sequence, -100).contiguous())


def hf_reference(family, model, inputs, target):
    """Logits, loss and gradients by engine name, from transformers."""
    model.eval()  # no dropout anywhere (the configs say 0 as well)
    model.zero_grad()
    if family == "bert":
        out = model(input_ids=inputs, labels=target)
    else:
        # shift_labels: every position predicts its target (transformers'
        # default shift would drop the last position).
        out = model(input_ids=inputs, labels=target, shift_labels=target)
    manual = torch.nn.functional.cross_entropy(out.logits.reshape(-1, VOCAB).float(),
                                               target.reshape(-1), ignore_index=-100)
    if getattr(out, "aux_loss", None) is not None:  # output_router_logits
        manual = manual + model.config.router_aux_loss_coef * out.aux_loss
    assert abs(out.loss.item() - manual.item()) < 1e-6, (out.loss.item(), manual.item())
    out.loss.backward()
    grads = {}
    for name, p in model.named_parameters():
        ename, transpose = engine_name(family, name)
        grads[ename] = (p.grad.t() if transpose else p.grad).detach().clone()
    return out.logits.detach(), out.loss.detach(), grads


def export_weights(family, model, path, perturb=None, zero_buffers=None):
    """Parameters and persistent buffers by engine name; `perturb` (a name)
    off by 1e-3, buffers and parameters whose name ends in `zero_buffers`
    zeroed."""
    tensors = {}
    for name, p in model.named_parameters():
        ename, transpose = engine_name(family, name)
        t = (p.t() if transpose else p).detach().contiguous().clone()
        if ename == perturb:
            t.view(-1)[0] += 1e-3
        if zero_buffers and name.endswith(zero_buffers):
            t = torch.zeros_like(t)
        tensors[ename] = t
    persistent = model.state_dict().keys()
    for name, b in model.named_buffers():
        if name in persistent:
            t = b.detach().contiguous().clone()
            tensors[engine_name(family, name)[0]] = (
                torch.zeros_like(t) if zero_buffers and name.endswith(zero_buffers) else t)
    save_file(tensors, path)


def run_engine(runner, family, workdir, tag, runs, weights="weights", config="config"):
    """[(outputs, metadata)] of autoaccel-reference for each (attention,
    checkpointing) of `runs`, all in one process."""
    outs = [os.path.join(workdir, f"{tag}-{weights}-{config}-{a}-{c}.out.safetensors")
            for a, c in runs]
    cmd = [runner, "--model", family, "--config", os.path.join(workdir, f"{tag}.{config}.json"),
           "--weights", os.path.join(workdir, f"{tag}.{weights}.safetensors"),
           "--batch", os.path.join(workdir, f"{tag}.batch.safetensors"), "--out", ",".join(outs),
           "--attention", ",".join(a for a, _ in runs),
           "--checkpointing", ",".join(c for _, c in runs)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
    results = []
    for out in outs:
        with safe_open(out, "pt") as f:
            metadata = f.metadata()
        results.append((load_file(out), metadata))
    return results


def compare(ref, got):
    """Failures (strings) and the worst figures of `got` against `ref`."""
    logits, loss, grads = ref
    failures = []
    logits_err = (got["logits"] - logits).abs().max().item()
    loss_err = abs(got["loss"].item() - loss.item())
    if logits_err > LOGITS_TOL:
        failures.append(f"logits differ by {logits_err:.3g} (tolerance {LOGITS_TOL})")
    if loss_err > LOSS_TOL:
        failures.append(f"loss differs by {loss_err:.3g} (tolerance {LOSS_TOL})")
    worst_ratio = 0.0
    got_names = {k.removeprefix("grad.") for k in got if k.startswith("grad.")}
    if got_names != set(grads):
        failures.append(f"gradient names differ: engine only {sorted(got_names - set(grads))}, "
                        f"transformers only {sorted(set(grads) - got_names)}")
    for name, g in grads.items():
        if name not in got_names:
            continue
        mine = got["grad." + name]
        if mine.shape != g.shape:
            failures.append(f"grad {name}: shape {tuple(mine.shape)} vs {tuple(g.shape)}")
            continue
        allowed = GRAD_RTOL * g.abs().max().item() + GRAD_ATOL
        err = (mine - g).abs().max().item()
        worst_ratio = max(worst_ratio, err / allowed)
        if err > allowed:
            failures.append(f"grad {name}: max |diff| {err:.3g} > {allowed:.3g}")
    return failures, logits_err, loss_err, worst_ratio


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runner", required=True, help="path to autoaccel-reference")
    parser.add_argument("--workdir", help="keep the exchanged files here (default: a temp dir)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    if not transformers.__version__.startswith("5."):
        print(f"check.py: note: transformers {transformers.__version__}; written against 5.23")
    start = time.monotonic()
    torch.set_num_threads(2)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        print(f"{'case':<16} {'run':<15} {'params':>7} {'logits err':>11} {'loss err':>10} "
              f"{'grad err/tol':>12}  result")
        for seed, (tag, family, cls, config) in enumerate(configs(), start=1):
            torch.manual_seed(seed)
            model = cls._from_config(config, attn_implementation="eager", dtype=torch.float32)
            scale_up_weights(model, config.hidden_size, seed)
            inputs, target = make_batch(family, seed)
            ref = hf_reference(family, model, inputs, target)
            with open(os.path.join(workdir, f"{tag}.config.json"), "w") as f:
                f.write(config.to_json_string())
            export_weights(family, model, os.path.join(workdir, f"{tag}.weights.safetensors"))
            save_file({"input": inputs, "target": target},
                      os.path.join(workdir, f"{tag}.batch.safetensors"))
            hf_params = model.num_parameters()
            runs = RUNS.get(tag, DEFAULT_RUNS)
            try:
                results = run_engine(args.runner, family, workdir, tag, runs)
            except RuntimeError as e:
                print(f"{tag:<16} {'':<15} FAILED: {e}")
                ok = False
                continue
            for (attention, checkpointing), (got, meta) in zip(runs, results):
                run = f"{attention}/{checkpointing}"
                failures, logits_err, loss_err, ratio = compare(ref, got)
                for key in ("parameter_count", "parameter_numel"):
                    if int(meta[key]) != hf_params:
                        failures.append(f"{key} {meta[key]} != transformers' {hf_params}")
                print(f"{tag:<16} {run:<15} {hf_params:>7} {logits_err:>11.2e} {loss_err:>10.2e} "
                      f"{ratio:>12.3f}  {'ok' if not failures else 'FAILED'}")
                for failure in failures if args.verbose else failures[:5]:
                    print(f"    {failure}")
                ok &= not failures
            if tag == "llama":
                # Negative control: a weight off by 1e-3 must be noticed.
                perturbed = "model.layers.1.self_attn.k_proj.weight"
                export_weights(family, model, os.path.join(workdir, f"{tag}.perturbed.safetensors"),
                               perturb=perturbed)
                [(got, _)] = run_engine(args.runner, family, workdir, tag, [("math", "none")],
                                        weights="perturbed")
                failures, *_ = compare(ref, got)
                noticed = bool(failures)
                print(f"{tag:<16} {'control':<15} {'':>7} perturbed {perturbed} by 1e-3: "
                      f"{'detected' if noticed else 'NOT DETECTED'}")
                ok &= noticed
            if tag in ZERO_CONTROLS:
                # Negative control: the buffers or parameters zeroed must be
                # noticed.
                zeroed = ZERO_CONTROLS[tag]
                export_weights(family, model, os.path.join(workdir, f"{tag}.zeroed.safetensors"),
                               zero_buffers=zeroed)
                [(got, _)] = run_engine(args.runner, family, workdir, tag, [("math", "none")],
                                        weights="zeroed")
                failures, *_ = compare(ref, got)
                noticed = bool(failures)
                print(f"{tag:<16} {'control':<15} {'':>7} {zeroed} zeroed: "
                      f"{'detected' if noticed else 'NOT DETECTED'}")
                ok &= noticed
            for key, value in FEATURE_CONTROLS.get(tag, []):
                # Negative control: the engine built without the feature (the
                # config's key changed) must disagree, so the case tests it.
                changed = json.loads(config.to_json_string())
                changed[key] = value
                with open(os.path.join(workdir, f"{tag}.control.json"), "w") as f:
                    json.dump(changed, f)
                [(got, _)] = run_engine(args.runner, family, workdir, tag, [("math", "none")],
                                        config="control")
                failures, *_ = compare(ref, got)
                noticed = bool(failures)
                print(f"{tag:<16} {'control':<15} {'':>7} {key}={json.dumps(value)}: "
                      f"{'detected' if noticed else 'NOT DETECTED'}")
                ok &= noticed
    print(f"check.py: {'all agree' if ok else 'MISMATCH'} "
          f"({time.monotonic() - start:.1f} s, transformers {transformers.__version__}, "
          f"torch {torch.__version__})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
