"""megatron.core builds the network the megatron export's architecture
section describes.

Only the megatron-core wheel (PyPI, 0.16.1, which scripts/setup installs) is
used. Megatron-LM's training flags are defined in its repository's
megatron/training/arguments.py, which no package installs, so this check does
not parse megatron_args.txt with Megatron's parser: FLAGS below, the test's
own mapping of each flag onto megatron.core's TransformerConfig fields and
GPTModel's arguments, follows what Megatron-LM does with them at tag
core_v0.16.1 (arguments.py: its flags, validate_args and
core_transformer_config_from_args; pretrain_gpt.py with gpt_builders.py: the
arguments GPTModel gets). The flag NAMES are therefore checked by hand and
pinned by export_test (docs/CLI.md), except that a flag arguments.py generates
from a TransformerConfig field must name a field of the wheel's
TransformerConfig. The flags that reach neither TransformerConfig nor GPTModel
(training, optimizer and data flags) are not checked, and each check lists
them; a flag the mapping does not know at all fails the check.

For a tiny model of every family in docs/MODELS.md (but qwen3_moe and
deepseek_v3, whose experts and attention the export does not build, as its
not_expressible rows say; export_test checks those rows), made with transformers'
own config classes, the check exports with the CLI, makes the TransformerConfig
(whose __post_init__ checks the values) and asserts the fields and GPTModel
arguments the family's architecture needs (Qwen2's q/k/v biases, Qwen3's
qk-layernorm, Llama 3.1's rope scaling, Mixtral's experts, Gemma 2's sliding
layers, ...), that the architecture section marks what Megatron cannot build
(Gemma 2's soft-capping), and builds on the CPU the GPTModel pretrain_gpt.py
would build (the local layer spec) and compares its parameter count with
transformers' model of the same config: equal, or short by exactly the
parameters the not_expressible rows say are missing (Gemma 2's sandwich norms).

For the strategies of exports.py (no model) the strategy's flags that map onto
TransformerConfig (parallel sizes, precision, recompute, attention backend) go
into one with a small model, whose __post_init__ checks the combination."""

import argparse
import dataclasses
import enum
import json
import os
import subprocess
import sys
import tempfile
import typing
import warnings

from exports import STRATEGIES, sizes

# ---- megatron_args.txt onto megatron.core: the test's mapping ----


def read_window_size(value):
    """--window-size "L,R": the tuple TransformerConfig.window_size takes."""
    return tuple(int(part) for part in value.split(","))


def read_layer_pattern(value):
    """--window-attn-skip-freq: an integer N, or a list "[1,0,...]" of one
    entry per layer."""
    if value.startswith("["):
        return [int(part) for part in value.strip("[]").split(",")]
    return int(value)


def swiglu(kw):
    import torch.nn.functional as F
    kw.update(gated_linear_unit=True, activation_func=F.silu)


def quick_geglu(kw):
    from megatron.core.activations import quick_gelu
    kw.update(gated_linear_unit=True, activation_func=quick_gelu)


def on(_):
    return True


def off(_):
    return False


# The flags arguments.py declares itself (not generated from a field), as
# Megatron-LM core_v0.16.1 hands them on: ("config", field, read) sets a
# TransformerConfig field (core_transformer_config_from_args, after
# validate_args), ("model", argument, read) one of GPTModel's arguments
# (gpt_builders.py), ("apply", f) calls f on the TransformerConfig arguments.
# `read` turns the text after "=" (None for a switch) into the value. None: a
# flag that reaches neither TransformerConfig nor GPTModel (training,
# optimizer and data flags, and the two rope flags pretrain_gpt.py does not
# pass to the model, as the export's architecture rows say): not checked. A
# flag in neither this table nor generated_flags() fails the check, so that a
# new or misspelt flag is classified here rather than silently skipped.
FLAGS = {
    "--swiglu": ("apply", swiglu),
    "--quick-geglu": ("apply", quick_geglu),
    # num_query_groups is kept only with it (core_transformer_config_from_args).
    "--group-query-attention": ("config", "group_query_attention", on),
    "--num-experts": ("config", "num_moe_experts", int),
    "--window-size": ("config", "window_size", read_window_size),
    "--window-attn-skip-freq": ("config", "window_attn_skip_freq", read_layer_pattern),
    "--no-gradient-accumulation-fusion": ("config", "gradient_accumulation_fusion", off),
    "--num-virtual-stages-per-pipeline-rank": ("config", "virtual_pipeline_model_parallel_size",
                                               int),
    "--position-embedding-type": ("model", "position_embedding_type", str),
    "--max-position-embeddings": ("model", "max_sequence_length", int),
    "--rotary-base": ("model", "rotary_base", int),
    "--rotary-percent": ("model", "rotary_percent", float),
    "--use-rope-scaling": ("model", "rope_scaling", on),
    "--padded-vocab-size": ("model", "vocab_size", int),
    "--untie-embeddings-and-output-weights": ("model", "share_embeddings_and_output_weights",
                                              off),
    "--rope-scaling-factor": None,
    "--rotary-seq-len-interpolation-factor": None,
    **dict.fromkeys([
        "--seq-length", "--micro-batch-size", "--global-batch-size", "--bert-no-binary-head",
        "--use-distributed-optimizer", "--use-torch-fsdp2", "--optimizer",
        "--optimizer-cpu-offload", "--use-precision-aware-optimizer", "--initial-loss-scale",
        "--loss-scale-window", "--hysteresis", "--min-loss-scale"]),
}


def generated_flags():
    """{flag: field} for the flags arguments.py generates from
    TransformerConfig's fields (its argument_utils.ArgumentGroupFactory): the
    field's name with dashes, "--no-NAME" and "--disable-NAME" for a bool
    that defaults to True, or the arg_names of the field's argparse_meta. Read
    from the wheel's own dataclass, so a field the wheel renames fails."""
    from megatron.core.transformer.transformer_config import TransformerConfig
    flags = {}
    for f in dataclasses.fields(TransformerConfig):
        if not f.init:
            continue
        names = f.metadata.get("argparse_meta", {}).get("arg_names")
        if names is None:
            name = f.name.replace("_", "-")
            names = ([f"--no-{name}", f"--disable-{name}"] if f.type is bool and f.default is True
                     else [f"--{name}"])
        for name in names:
            flags[name] = f
    return flags


def read_field(field, value):
    """`value` (None for a flag without "=") as the type of `field`."""
    if field.type is bool:
        assert value is None, f"--{field.name} takes no value"
        return not field.default  # store_true, or store_false for a default True
    kind = field.type
    if typing.get_origin(kind) is typing.Union:  # Optional[X]
        kind = [k for k in typing.get_args(kind) if k is not type(None)][0]
    if typing.get_origin(kind) is typing.Literal:
        assert value in typing.get_args(kind), f"{value!r} is not one of {typing.get_args(kind)}"
        return value
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind[value]
    return kind(value)


# The GPTModel arguments gpt_builders.py passes, at arguments.py's defaults
# (flag absent); --padded-vocab-size and --max-position-embeddings have none.
MODEL_DEFAULTS = dict(share_embeddings_and_output_weights=True,
                      position_embedding_type="learned_absolute", rotary_percent=1.0,
                      rotary_base=10000, rope_scaling=False)


class Mapped:
    """megatron_args.txt as megatron.core's TransformerConfig arguments
    (`config`) and GPTModel's (`model`), and the flags left unchecked."""

    def __init__(self, words):
        self.config, self.model, self.unchecked = {}, dict(MODEL_DEFAULTS), []
        generated = generated_flags()
        unknown = []
        for word in words:
            name, _, value = word.partition("=")
            value = value if "=" in word else None
            if name in FLAGS:
                self._hand_written(name, value)
            elif name in generated:
                self.config[generated[name].name] = read_field(generated[name], value)
            else:
                unknown.append(name)
        assert not unknown, (f"{' '.join(unknown)}: neither a TransformerConfig field's flag nor "
                             "in FLAGS; add it there")
        # What validate_args and core_transformer_config_from_args add.
        if not self.config.pop("group_query_attention", False):
            self.config.pop("num_query_groups", None)
        import torch
        dtype = (torch.bfloat16 if self.config.get("bf16")
                 else torch.half if self.config.get("fp16") else torch.float)
        self.config.update(params_dtype=dtype, pipeline_dtype=dtype)
        if self.config.get("tensor_model_parallel_size", 1) == 1:
            self.config["sequence_parallel"] = False

    def _hand_written(self, name, value):
        entry = FLAGS[name]
        if entry is None:
            self.unchecked.append(name)
        elif entry[0] == "apply":
            entry[1](self.config)
        else:
            where, key, read = entry
            (self.config if where == "config" else self.model)[key] = read(value)

    def transformer_config(self, **overrides):
        from megatron.core.transformer.transformer_config import TransformerConfig
        return TransformerConfig(**dict(self.config, **overrides))


# What the CPU needs and does not change the network: no fused kernels (Apex,
# Transformer Engine), weights made on the host, the torch norms and
# attention of the local layer spec.
CPU = dict(transformer_impl="local", use_cpu_initialization=True, apply_rope_fusion=False,
           persist_layer_norm=False, gradient_accumulation_fusion=False,
           masked_softmax_fusion=False, bias_activation_fusion=False, bias_dropout_fusion=False)


class GPTBuilder:
    """GPTModel as gpt_builders.py builds it with --transformer-impl local,
    on one gloo rank."""

    def __init__(self):
        self.initialized = False

    def __call__(self, mapped, config):
        import torch.distributed as dist
        from megatron.core import parallel_state
        from megatron.core.models.gpt import GPTModel
        from megatron.core.models.gpt.gpt_layer_specs import (get_gpt_decoder_block_spec,
                                                              get_gpt_layer_local_spec)
        if not self.initialized:
            store = tempfile.mktemp(prefix="autoaccel-megatron-store-")
            dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
            parallel_state.initialize_model_parallel(1, 1)
            self.initialized = True
        if config.num_moe_experts:
            spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False,
                                              normalization=config.normalization)
        else:
            spec = get_gpt_layer_local_spec(qk_layernorm=config.qk_layernorm,
                                            normalization=config.normalization)
        return GPTModel(config=config, transformer_layer_spec=spec, **mapped.model)


def run_export(autoaccel, strategy, model=None, config_path=None, seq_len=64):
    world, batch = sizes(strategy)
    out = tempfile.mkdtemp(prefix="autoaccel-export-")
    cmd = [autoaccel, "export", "--strategy", strategy, "--world-size", str(world),
           "--global-batch-size", str(batch), "--seq-len", str(seq_len), "--format", "megatron",
           "--out", out, "--json"]
    if model:
        cmd += ["--model", model, "--model-config", config_path]
    run = subprocess.run(cmd, capture_output=True, text=True)
    doc = json.loads(run.stdout)
    assert run.returncode == (2 if doc["rejected"] else 0), (run.returncode, run.stderr)
    return doc, out


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


def unchecked(mapped):
    return f"; not checked: {' '.join(mapped.unchecked)}" if mapped.unchecked else ""


# ---- The families: a tiny config each, and what its architecture needs ----

SEQ_LEN = 64
ONE_RANK = ("mbs=1,ga=2,precision=bf16,checkpoint=selective,attention=sdpa,"
            "optimizer=fused_adamw,offload=none")


def tiny_configs():
    """(family, transformers config, {"config.X"/"model.X": expected}, the
    architecture rows that must be not_expressible, {row: parameters of
    transformers' model that Megatron's lacks because of it}; None: no model
    is built) for each family of docs/MODELS.md but qwen3_moe and deepseek_v3."""
    import transformers as t
    small = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                 max_position_embeddings=128)
    llama3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}
    decoder = {"config.normalization": "RMSNorm", "config.gated_linear_unit": True,
               "config.add_bias_linear": False, "config.hidden_dropout": 0.0,
               "config.attention_dropout": 0.0, "model.position_embedding_type": "rope",
               "model.share_embeddings_and_output_weights": False, "model.vocab_size": 256,
               "config.num_query_groups": 2, "config.kv_channels": 16}
    return [
        ("gpt2", t.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=128),
         {"config.normalization": "LayerNorm", "config.add_bias_linear": True,
          "config.gated_linear_unit": False,
          "model.position_embedding_type": "learned_absolute", "model.max_sequence_length": 128,
          "model.share_embeddings_and_output_weights": True, "config.num_query_groups": 4},
         [], {}),
        ("bert", t.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                              intermediate_size=128, vocab_size=256, max_position_embeddings=128),
         {"config.layernorm_epsilon": 1e-12}, ["network", "token_types"], None),
        ("llama", t.LlamaConfig(**dict(small, max_position_embeddings=131072),
                                rope_parameters=llama3),
         dict(decoder, **{"model.rope_scaling": True, "model.rotary_base": 500000}), [], {}),
        ("mistral", t.MistralConfig(**small, sliding_window=16),
         dict(decoder, **{"config.window_size": (15, 0), "config.window_attn_skip_freq": None}),
         [], {}),
        ("mixtral", t.MixtralConfig(**small, num_local_experts=4, num_experts_per_tok=2),
         dict(decoder, **{"config.num_moe_experts": 4, "config.moe_router_topk": 2,
                          "config.moe_ffn_hidden_size": 128, "model.rotary_base": 1000000}),
         [], {}),
        ("qwen2", t.Qwen2Config(**small),
         dict(decoder, **{"config.add_qkv_bias": True, "config.qk_layernorm": False,
                          "config.window_size": None}), [], {}),
        # Layers from max_window_layers on slide: layer 1 full, layer 2 sliding.
        ("qwen2", t.Qwen2Config(**small, use_sliding_window=True, sliding_window=16,
                                max_window_layers=1),
         dict(decoder, **{"config.add_qkv_bias": True, "config.window_size": (15, 0),
                          "config.window_attn_skip_freq": [0, 1]}), [], {}),
        ("qwen3", t.Qwen3Config(**small, head_dim=32),
         dict(decoder, **{"config.qk_layernorm": True, "config.add_qkv_bias": False,
                          "config.kv_channels": 32}), [], {}),
        ("phi3", t.Phi3Config(**small, partial_rotary_factor=0.5, pad_token_id=0),
         dict(decoder, **{"model.rotary_percent": 0.5}), [], {}),
        ("gemma", t.GemmaConfig(**dict(small, num_key_value_heads=1), head_dim=32),
         dict(decoder, **{"config.layernorm_zero_centered_gamma": True, "config.kv_channels": 32,
                          "config.num_query_groups": 1,
                          "model.share_embeddings_and_output_weights": True}),
         ["embedding_scale"], {}),
        # Layer 1 slides, layer 2 attends to everything (Gemma 2's alternation).
        ("gemma2", t.Gemma2Config(**small, head_dim=16, sliding_window=16,
                                  query_pre_attn_scalar=16),
         dict(decoder, **{"config.layernorm_zero_centered_gamma": True,
                          "config.window_size": (15, 0), "config.window_attn_skip_freq": 2,
                          "model.share_embeddings_and_output_weights": True}),
         ["sandwich_norm", "embedding_scale", "attn_logit_softcapping",
          "final_logit_softcapping"],
         # post_attention_layernorm and post_feedforward_layernorm of each
         # layer: 2 layers * 2 norms * hidden 64.
         {"sandwich_norm": 2 * 2 * 64}),
    ]


def hf_parameter_count(config):
    import torch
    import transformers
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config).num_parameters()


def check_family(build, autoaccel, family, config, expected, not_expressible, missing):
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

    mapped = Mapped(words_of(out))
    config_of = mapped.transformer_config(**CPU)
    for key, want in expected.items():
        where, name = key.split(".")
        got = (getattr(config_of, name) if where == "config"
               else mapped.model.get(name, "(not given)"))
        assert got == want, f"{key} is {got!r}, the architecture needs {want!r}"
    sizes_of = {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                "ffn_hidden_size": 4 * 64 if family == "gpt2" else 128}
    for name, want in sizes_of.items():
        assert getattr(config_of, name) == want, f"{name} is {getattr(config_of, name)}"
    if missing is None:  # bert: BertModel is another network (the rows say so)
        return f"{len(rows)} rows, {', '.join(cannot)} not_expressible" + unchecked(mapped)

    import torch.nn.functional as F
    if config_of.gated_linear_unit and rows["activation"]["status"] == "exact":
        assert config_of.activation_func is F.silu, config_of.activation_func
    # The torch norm of the local spec cannot centre gamma (Transformer
    # Engine's can); the parameters are the same.
    config_of.layernorm_zero_centered_gamma = False
    megatron_count = sum(p.numel() for p in build(mapped, config_of).parameters())
    hf_count = hf_parameter_count(config)
    assert set(missing) <= set(cannot), f"{sorted(missing)} must be not_expressible rows"
    gap = sum(missing.values())
    assert hf_count - megatron_count == gap, (
        f"parameters: Megatron's GPTModel {megatron_count}, transformers' {hf_count}, "
        f"expected {gap} fewer in Megatron's")
    return (f"{megatron_count} parameters as transformers'"
            + "".join(f" less {n} ({row})" for row, n in missing.items())
            + (f"; not_expressible: {', '.join(cannot)}" if cannot else "") + unchecked(mapped))


def check_strategy(build, autoaccel, strategy):
    doc, out = run_export(autoaccel, strategy)
    if doc["rejected"]:
        return "rejected by the exporter"
    assert doc["architecture"] == [], "an architecture section without a model"
    mapped = Mapped(words_of(out))
    # The model's flags come from --model; a strategy alone needs these.
    keys = dict(kv.split("=") for kv in strategy.split(","))
    ep = int(keys.get("ep", 1))
    # Expert parallelism needs experts: a Mixtral's flags would give them
    # (and --disable-bias-linear).
    moe = {"num_moe_experts": 4, "add_bias_linear": False} if ep > 1 else {}
    config = mapped.transformer_config(num_layers=8, hidden_size=64, num_attention_heads=4, **moe)
    cp = int(keys.get("cp", 1))
    assert config.context_parallel_size == cp, config.context_parallel_size
    if cp > 1:
        assert config.cp_comm_type == keys["cp_comm"], config.cp_comm_type
    assert config.expert_model_parallel_size == ep, config.expert_model_parallel_size
    # fp8: Transformer Engine's hybrid format (e4m3 forward, e5m2 backward),
    # per-tensor current scaling.
    if keys["precision"] == "fp8":
        assert (config.bf16, config.fp8, config.fp8_recipe) == (True, "hybrid", "tensorwise"), (
            config.bf16, config.fp8, config.fp8_recipe)
    else:
        assert config.fp8 is None, config.fp8
    if ep > 1:
        assert config.moe_token_dispatcher_type == "alltoall", config.moe_token_dispatcher_type
        # Megatron's expert tensor parallelism is the tensor-parallel size, as ours.
        assert config.expert_tensor_parallel_size == config.tensor_model_parallel_size
    return (f"tp {config.tensor_model_parallel_size}, pp {config.pipeline_model_parallel_size}, "
            f"cp {config.context_parallel_size} ({config.cp_comm_type or '-'}), "
            f"ep {config.expert_model_parallel_size}, fp8 {config.fp8 or '-'}, "
            f"recompute {config.recompute_granularity or 'none'}" + unchecked(mapped))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--autoaccel", required=True)
    cli = parser.parse_args()
    warnings.filterwarnings("ignore")
    try:
        import megatron.core  # noqa: F401 - the wheel
    except ImportError as e:
        sys.exit(f"check_megatron: cannot import megatron.core ({e}): scripts/setup installs "
                 "megatron-core into .venv")
    build = GPTBuilder()
    passed = failed = 0

    def report(name, check, *args):
        nonlocal passed, failed
        try:
            detail = check(build, cli.autoaccel, *args)
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
