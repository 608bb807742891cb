"""Megatron-LM reads the megatron export and builds the network its
architecture section describes.

Megatron-LM's own parser (megatron/training/arguments.py of core_v0.16.1,
copied unchanged into megatron_lm/ beside this file: see its README) parses
megatron_args.txt as `$(cat megatron_args.txt)` splits it, with
allow_abbrev=False as Megatron's parse_args does, so a flag name that is not
exactly Megatron's fails. Its validate_args then checks the combination and
core_transformer_config_from_args makes megatron.core's TransformerConfig
(the megatron-core 0.16.1 wheel).

For the strategies of exports.py (no model) that is all. For a tiny model of
every family in docs/MODELS.md, made with transformers' own config classes,
the check also asserts the TransformerConfig fields and arguments the family's
architecture needs (Qwen2's q/k/v biases, Qwen3's qk-layernorm, Llama 3.1's
rope scaling, Mixtral's experts, Gemma 2's sliding layers, ...), that the
architecture section marks what Megatron cannot build (Gemma 2's
soft-capping), and builds on the CPU the GPTModel pretrain_gpt.py would build
from those arguments (gpt_builders.py's local layer spec) and compares its
parameter count with transformers' model of the same config: equal, or short
by exactly the parameters a not_expressible row says are missing."""

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import types
import warnings

from exports import STRATEGIES, sizes

HERE = os.path.dirname(os.path.abspath(__file__))


def megatron_arguments():
    """megatron.training.arguments from megatron_lm/, on top of the wheel's
    megatron.core. megatron.training.utils imports the training loop; the
    five functions arguments.py takes from it are given here, as Megatron
    defines them (get_device_arch_version answers Hopper: there is no GPU)."""
    warnings.filterwarnings("ignore")
    try:
        import megatron.core  # noqa: F401 - the wheel
    except ImportError as e:
        sys.exit(f"check_megatron: cannot import megatron.core ({e}): scripts/setup installs "
                 "megatron-core into .venv")
    import megatron

    training = types.ModuleType("megatron.training")
    training.__path__ = [os.path.join(HERE, "megatron_lm", "megatron", "training")]
    sys.modules["megatron.training"] = training
    megatron.training = training
    utils = types.ModuleType("megatron.training.utils")
    utils.get_device_arch_version = lambda: 9
    utils.update_use_dist_ckpt = lambda args: setattr(
        args, "use_dist_ckpt", args.ckpt_format != "torch")
    utils.print_rank_0 = lambda *a, **k: None
    utils.warn_rank_0 = lambda *a, **k: None
    utils.is_rank0 = lambda: False  # validate_args' print of every argument
    sys.modules["megatron.training.utils"] = utils
    from megatron.training import arguments
    return arguments


class Megatron:
    """Megatron-LM's parser, validation and model, as pretrain_gpt.py uses them."""

    # What the CPU needs and does not change the network: no fused kernels
    # (Apex, Transformer Engine), weights made on the host, the torch norms
    # and attention of gpt_builders.py's local layer spec.
    CPU_FLAGS = ["--transformer-impl", "local", "--use-cpu-initialization", "--no-rope-fusion",
                 "--no-persist-layer-norm", "--no-gradient-accumulation-fusion",
                 "--no-masked-softmax-fusion", "--no-bias-gelu-fusion", "--no-bias-swiglu-fusion",
                 "--no-bias-dropout-fusion"]

    def __init__(self):
        self.arguments = megatron_arguments()
        self.model_parallel = False

    def parser(self):
        parser = argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False)
        return self.arguments.add_megatron_arguments(parser)

    def parse(self, words, world_size, extra=(), environment=None):
        """The arguments after validate_args (which reads the environment:
        `environment`, the command's own assignments); raises with argparse's
        message for a flag Megatron does not have or a value it cannot read."""
        parser = self.parser()
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                args = parser.parse_args(list(words) + list(extra))
        except SystemExit:
            raise AssertionError("Megatron's parser refused the flags: "
                                 + errors.getvalue().strip().splitlines()[-1])
        args.rank = 0
        args.world_size = world_size
        os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
        os.environ.update(environment or {})
        with contextlib.redirect_stdout(io.StringIO()):
            self.arguments.validate_args(args)
        return args

    def config(self, args):
        return self.arguments.core_transformer_config_from_args(args)

    def gpt_model(self, args, config):
        """The GPTModel gpt_builders.py builds with the local layer spec."""
        import torch.distributed as dist
        from megatron.core import parallel_state
        from megatron.core.models.gpt import GPTModel
        from megatron.core.models.gpt.gpt_layer_specs import (get_gpt_decoder_block_spec,
                                                              get_gpt_layer_local_spec)
        if not self.model_parallel:
            store = tempfile.mktemp(prefix="autoaccel-megatron-store-")
            dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
            parallel_state.initialize_model_parallel(1, 1)
            self.model_parallel = True
        if args.num_experts:
            spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False,
                                              normalization=args.normalization,
                                              qk_l2_norm=args.qk_l2_norm)
        else:
            spec = get_gpt_layer_local_spec(args.num_experts, args.moe_grouped_gemm,
                                            args.qk_layernorm, args.multi_latent_attention,
                                            args.experimental_attention_variant,
                                            normalization=args.normalization)
        return GPTModel(config=config, transformer_layer_spec=spec,
                        vocab_size=args.padded_vocab_size,
                        max_sequence_length=args.max_position_embeddings,
                        share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
                        position_embedding_type=args.position_embedding_type,
                        rotary_percent=args.rotary_percent, rotary_base=args.rotary_base,
                        rope_scaling=args.use_rope_scaling)


def run_export(autoaccel, strategy, fmt="megatron", model=None, config_path=None, seq_len=64):
    world, batch = sizes(strategy)
    out = tempfile.mkdtemp(prefix="autoaccel-export-")
    cmd = [autoaccel, "export", "--strategy", strategy, "--world-size", str(world),
           "--global-batch-size", str(batch), "--seq-len", str(seq_len), "--format", fmt,
           "--out", out, "--json"]
    if model:
        cmd += ["--model", model, "--model-config", config_path]
    run = subprocess.run(cmd, capture_output=True, text=True)
    doc = json.loads(run.stdout)
    assert run.returncode == (2 if doc["rejected"] else 0), (run.returncode, run.stderr)
    return doc, out


def environment_of(command):
    """The VAR=value assignments that start a command."""
    env = {}
    for word in command.split():
        if "=" not in word or word.startswith("-"):
            break
        key, value = word.split("=", 1)
        env[key] = value
    return env


def words_of(out):
    """megatron_args.txt as the command's `$(cat megatron_args.txt)` splits it,
    which must be what a launcher's {*megatron_args} passes: one argument per
    non-empty line (docs/LAUNCHERS.md)."""
    with open(os.path.join(out, "megatron_args.txt")) as f:
        text = f.read()
    words = text.split()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    assert words == lines, "a line of megatron_args.txt holds more than one argument"
    return words


# ---- The families: a tiny config each, and what its architecture needs ----

SEQ_LEN = 64
ONE_RANK = ("mbs=1,ga=2,precision=bf16,checkpoint=selective,attention=sdpa,"
            "optimizer=fused_adamw,offload=none")


def tiny_configs():
    """(family, transformers config, {"args.X"/"config.X": expected}, the
    architecture rows that must be not_expressible, parameters Megatron's
    model lacks) for each family of docs/MODELS.md."""
    import transformers as t
    small = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                 max_position_embeddings=128)
    llama3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}
    decoder = {"config.normalization": "RMSNorm", "config.gated_linear_unit": True,
               "config.add_bias_linear": False, "config.hidden_dropout": 0.0,
               "config.attention_dropout": 0.0, "args.position_embedding_type": "rope",
               "args.untie_embeddings_and_output_weights": True, "args.padded_vocab_size": 256,
               "config.num_query_groups": 2, "config.kv_channels": 16}
    return [
        ("gpt2", t.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=128),
         {"config.normalization": "LayerNorm", "config.add_bias_linear": True,
          "config.gated_linear_unit": False, "args.position_embedding_type": "learned_absolute",
          "args.max_position_embeddings": 128, "args.untie_embeddings_and_output_weights": False,
          "args.group_query_attention": False}, [], 0),
        ("bert", t.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                              intermediate_size=128, vocab_size=256, max_position_embeddings=128),
         {"args.bert_binary_head": False, "config.layernorm_epsilon": 1e-12},
         ["network", "token_types"], None),
        ("llama", t.LlamaConfig(**dict(small, max_position_embeddings=131072),
                                rope_parameters=llama3),
         dict(decoder, **{"args.use_rope_scaling": True, "args.rope_scaling_factor": 8.0,
                          "args.rotary_base": 500000}), [], 0),
        ("mistral", t.MistralConfig(**small, sliding_window=16),
         dict(decoder, **{"config.window_size": (15, 0), "config.window_attn_skip_freq": None}),
         [], 0),
        ("mixtral", t.MixtralConfig(**small, num_local_experts=4, num_experts_per_tok=2),
         dict(decoder, **{"config.num_moe_experts": 4, "config.moe_router_topk": 2,
                          "config.moe_ffn_hidden_size": 128, "args.rotary_base": 1000000}),
         [], 0),
        ("qwen2", t.Qwen2Config(**small),
         dict(decoder, **{"config.add_qkv_bias": True, "config.qk_layernorm": False,
                          "config.window_size": None}), [], 0),
        # Layers from max_window_layers on slide: layer 1 full, layer 2 sliding.
        ("qwen2", t.Qwen2Config(**small, use_sliding_window=True, sliding_window=16,
                                max_window_layers=1),
         dict(decoder, **{"config.add_qkv_bias": True, "config.window_size": (15, 0),
                          "config.window_attn_skip_freq": [0, 1]}), [], 0),
        ("qwen3", t.Qwen3Config(**small, head_dim=32),
         dict(decoder, **{"config.qk_layernorm": True, "config.add_qkv_bias": False,
                          "config.kv_channels": 32}), [], 0),
        ("phi3", t.Phi3Config(**small, partial_rotary_factor=0.5, pad_token_id=0),
         dict(decoder, **{"args.rotary_percent": 0.5}), [], 0),
        ("gemma", t.GemmaConfig(**dict(small, num_key_value_heads=1), head_dim=32),
         dict(decoder, **{"config.layernorm_zero_centered_gamma": True, "config.kv_channels": 32,
                          "config.num_query_groups": 1,
                          "args.untie_embeddings_and_output_weights": False}),
         ["embedding_scale"], 0),
        # Layer 1 slides, layer 2 attends to everything (Gemma 2's alternation).
        ("gemma2", t.Gemma2Config(**small, head_dim=16, sliding_window=16,
                                  query_pre_attn_scalar=16),
         dict(decoder, **{"config.layernorm_zero_centered_gamma": True,
                          "config.window_size": (15, 0), "config.window_attn_skip_freq": 2,
                          "args.untie_embeddings_and_output_weights": False}),
         ["sandwich_norm", "embedding_scale", "attn_logit_softcapping",
          "final_logit_softcapping"],
         # post_attention_layernorm and post_feedforward_layernorm of each layer
         2 * 2 * 64),
    ]


def hf_parameter_count(config):
    import torch
    import transformers
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config).num_parameters()


def check_family(megatron, autoaccel, family, config, expected, not_expressible, missing):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(config.to_json_string())
    doc, out = run_export(autoaccel, ONE_RANK, model=family, config_path=f.name,
                          seq_len=SEQ_LEN)
    rows = {r["feature"]: r for r in doc["architecture"]}
    assert rows, "no architecture section"
    script = "pretrain_bert.py" if family == "bert" else "pretrain_gpt.py"
    assert f" {script} $(cat " in doc["command"], doc["command"]
    cannot = sorted(name for name, r in rows.items() if r["status"] == "not_expressible")
    assert cannot == sorted(not_expressible), f"not_expressible rows {cannot}"

    args = megatron.parse(words_of(out), 1, Megatron.CPU_FLAGS, environment_of(doc["command"]))
    config_of = megatron.config(args)
    for key, want in expected.items():
        where, name = key.split(".")
        got = getattr(args if where == "args" else config_of, name)
        assert got == want, f"{key} is {got!r}, the architecture needs {want!r}"
    sizes_of = {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                "ffn_hidden_size": 4 * 64 if family == "gpt2" else 128}
    for name, want in sizes_of.items():
        assert getattr(config_of, name) == want, f"{name} is {getattr(config_of, name)}"
    if missing is None:  # bert: BertModel is another network (the rows say so)
        return f"{len(rows)} rows, {', '.join(cannot)} not_expressible"

    import torch.nn.functional as F
    if config_of.gated_linear_unit and rows["activation"]["status"] == "exact":
        assert config_of.activation_func is F.silu, config_of.activation_func
    # The torch norm of the local spec cannot centre gamma (Transformer
    # Engine's can); the parameters are the same.
    config_of.layernorm_zero_centered_gamma = False
    megatron_count = sum(p.numel() for p in megatron.gpt_model(args, config_of).parameters())
    hf_count = hf_parameter_count(config)
    assert hf_count - megatron_count == missing, (
        f"parameters: Megatron's GPTModel {megatron_count}, transformers' {hf_count}, "
        f"expected {missing} fewer in Megatron's")
    return (f"{megatron_count} parameters as transformers'"
            + (f" less {missing}" if missing else "")
            + (f"; not_expressible: {', '.join(cannot)}" if cannot else ""))


def check_strategy(megatron, autoaccel, strategy):
    doc, out = run_export(autoaccel, strategy)
    if doc["rejected"]:
        return "rejected by the exporter"
    assert doc["architecture"] == [], "an architecture section without a model"
    world, _ = sizes(strategy)
    # The model's flags come from --model; a strategy alone needs these.
    model = ["--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4",
             "--max-position-embeddings", "512"]
    words = words_of(out)
    if "--use-torch-fsdp2" in words:  # the sharding row says FSDP2 needs it
        model.append("--untie-embeddings-and-output-weights")
    env = environment_of(doc["command"])
    args = megatron.parse(words + model, world, environment=env)
    return (f"dp {args.data_parallel_size}, tp {args.tensor_model_parallel_size}"
            + "".join(f", {k}={v}" for k, v in env.items()))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--autoaccel", required=True)
    cli = parser.parse_args()
    megatron = Megatron()
    passed = failed = 0

    def report(name, check, *args):
        nonlocal passed, failed
        try:
            detail = check(megatron, cli.autoaccel, *args)
            passed += 1
            print(f"ok        {name}: {detail}")
        except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
            failed += 1
            print(f"FAILED    {name}: {type(e).__name__}: {e}")

    for strategy in STRATEGIES:
        report(strategy, check_strategy, strategy)
    seen = set()
    for family, config, expected, not_expressible, missing in tiny_configs():
        name = family if family not in seen else f"{family} (sliding layers)"
        seen.add(family)
        report(name, check_family, family, config, expected, not_expressible, missing)
    print(f"megatron: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
