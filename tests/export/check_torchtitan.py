"""The torchtitan export, read and built by torchtitan 0.2.2 itself (run with
.venv-torchtitan's python):

1. for a tiny config of every family of docs/MODELS.md (but deepseek_v3,
   whose router, shared experts and latent attention the export does not
   build, as its not_expressible rows say; export_test checks those rows),
   made with transformers' own config classes, the exported model module
   registers its flavor and torchtitan's own model class builds it (on the
   meta device): its parameter count equals transformers' model of the same
   config when every architecture row is exact (Qwen3-MoE and Mixtral with
   torchtitan's MoE too), and the rows that are not are the ones the
   family's features explain (Qwen2's biases, Gemma's norms, ...);
2. for the strategies of exports.py, torchtitan's ConfigManager reads the job
   file (it refuses a key its JobConfig lacks) and its JobConfig holds the
   strategy: parallel degrees, batch sizes, FSDP, precision, activation
   checkpointing and the AdamW implementation, and none of the user's
   optimizer hyperparameters;
3. the same for expert-parallel strategies exported with a tiny Qwen3-MoE:
   expert_parallel_degree and expert_tensor_parallel_degree read back, and
   torchtitan's ParallelDims builds its dense and expert device meshes from
   the job file (over a fake process group) with ep ranks each holding
   experts / ep experts; for the layouts the export rejects (experts over
   replicated data-parallel ranks) the same degrees fail in ParallelDims.

run_export.py trains with the export; this checks what one run cannot: every
family and layout."""

import importlib.util
import os
import subprocess
import sys
import tempfile
import tomllib

from exports import main

ONE_RANK = ("mbs=1,ga=2,precision=bf16,checkpoint=full,attention=sdpa,"
            "optimizer=fused_adamw,offload=none")


def tiny_configs():
    """(family, transformers config, the architecture rows that must not be
    exact[, the parameters transformers' model has that torchtitan's lacks
    because of them]) for each family of docs/MODELS.md but deepseek_v3."""
    import transformers as t
    small = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                 max_position_embeddings=128)
    moe = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
    llama3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}
    return [
        ("gpt2", t.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=128),
         {"network", "normalization", "activation", "biases", "position_embedding",
          "embeddings"}),
        ("bert", t.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                              intermediate_size=128, vocab_size=256, max_position_embeddings=128),
         {"network", "normalization", "activation", "biases", "position_embedding",
          "embeddings"}),
        ("llama", t.LlamaConfig(**dict(small, intermediate_size=200), rope_parameters=llama3),
         set()),
        ("llama", t.LlamaConfig(**small), set()),
        ("mistral", t.MistralConfig(**small, sliding_window=None), set()),
        ("mistral", t.MistralConfig(**small, sliding_window=16), {"sliding_window"}),
        # torchtitan's qwen3 model with its MoE, q/k norms off.
        ("mixtral", t.MixtralConfig(**small, num_local_experts=4, num_experts_per_tok=2),
         set()),
        # torchtitan's model lacks exactly the q, k and v biases: 2 layers *
        # (64 + 32 + 32).
        ("qwen2", t.Qwen2Config(**small), {"biases"}, 2 * (64 + 32 + 32)),
        ("qwen3", t.Qwen3Config(**small, head_dim=32), set()),
        ("qwen3", t.Qwen3Config(**small, head_dim=16, tie_word_embeddings=False), set()),
        # torchtitan's qwen3 model with its MoE: experts of their own width,
        # top-k weights renormalised or not.
        ("qwen3_moe", t.Qwen3MoeConfig(**small, head_dim=16, **moe), set()),
        ("qwen3_moe", t.Qwen3MoeConfig(**small, head_dim=16, **moe, norm_topk_prob=True,
                                       tie_word_embeddings=True), set()),
        # A dense layer among them: torchtitan gives every layer experts.
        ("qwen3_moe", t.Qwen3MoeConfig(**small, head_dim=16, **moe, mlp_only_layers=[0]),
         {"ffn", "dense_layers"}),
        ("phi3", t.Phi3Config(**small, partial_rotary_factor=0.5, pad_token_id=0),
         {"partial_rotary"}),
        ("gemma", t.GemmaConfig(**dict(small, num_key_value_heads=1), head_dim=32),
         {"head_dim", "normalization", "activation", "embeddings", "embedding_scale"}),
        ("gemma2", t.Gemma2Config(**small, head_dim=16, sliding_window=16,
                                  query_pre_attn_scalar=16),
         {"normalization", "sandwich_norm", "activation", "embeddings", "embedding_scale",
          "sliding_window", "soft_capping"}),
    ]


def export_model(autoaccel, family, config, out, strategy=ONE_RANK):
    config.save_pretrained(out)
    keys = dict(kv.split("=") for kv in strategy.split(","))
    dp, tp, pp, cp = (int(keys.get(k, 1)) for k in ("dp", "tp", "pp", "cp"))
    batch = int(keys["mbs"]) * int(keys["ga"]) * dp
    cmd = [autoaccel, "export", "--strategy", strategy, "--world-size", str(dp * tp * pp * cp),
           "--global-batch-size", str(batch), "--seq-len", "64", "--format", "torchtitan",
           "--model", family, "--model-config", os.path.join(out, "config.json"),
           "--out", out, "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    import json
    doc = json.loads(run.stdout)
    assert run.returncode == (2 if doc["rejected"] else 0), (cmd, run.stderr)
    return doc


def torchtitan_parameters(out, model_name):
    """Imports the exported module (it registers the flavor) and counts the
    parameters of torchtitan's model of that flavor."""
    import torch
    from torchtitan.protocols.train_spec import get_train_spec
    path = os.path.join(out, "autoaccel_torchtitan_model.py")
    spec = importlib.util.spec_from_file_location(f"autoaccel_model_{id(out)}", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    train_spec = get_train_spec(model_name)
    args = train_spec.model_args["autoaccel"]
    with torch.device("meta"):
        model = train_spec.model_cls(args)
    # parameters() yields a tied output weight once (it is the embedding's
    # Parameter), as transformers' num_parameters() counts a tied LM head.
    count = sum(p.numel() for p in model.parameters())
    del train_spec.model_args["autoaccel"]
    return count


def check_families(autoaccel):
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM
    failed = 0
    for family, config, not_exact, *missing in tiny_configs():
        out = tempfile.mkdtemp(prefix="autoaccel-torchtitan-")
        try:
            doc = export_model(autoaccel, family, config, out)
            rows = {r["feature"]: r for r in doc["architecture"]}
            bad = {f for f, r in rows.items() if r["status"] != "exact"}
            assert bad == not_exact, f"rows not exact: {sorted(bad)}, want {sorted(not_exact)}"
            assert all(rows[f]["status"] == "not_expressible" for f in bad), rows
            with open(os.path.join(out, "autoaccel_torchtitan.toml"), "rb") as f:
                model_name = tomllib.load(f)["model"]["name"]
            titan = torchtitan_parameters(out, model_name)
            with torch.device("meta"):
                cls = AutoModelForMaskedLM if family == "bert" else AutoModelForCausalLM
                hf = cls.from_config(config).num_parameters()
            if not bad or missing:
                want = hf - (missing[0] if missing else 0)
                assert titan == want, f"torchtitan builds {titan} parameters, want {want}"
            print(f"ok        {family}: {model_name}, {titan} parameters (transformers {hf})"
                  + (f"; not expressible: {', '.join(sorted(bad))}" if bad else ""))
        except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
            failed += 1
            print(f"FAILED    {family}: {type(e).__name__}: {e}")
    return failed


def check(strategy, doc, out):
    from torchtitan.config import ConfigManager
    keys = dict(kv.split("=") for kv in strategy.split(","))
    dp, tp, pp, cp, ep = (int(keys.get(k, 1)) for k in ("dp", "tp", "pp", "cp", "ep"))
    mbs, ga = int(keys["mbs"]), int(keys["ga"])
    path = os.path.join(out, "autoaccel_torchtitan.toml")
    job = ConfigManager().parse_args(["--job.config_file", path])
    with open(path, "rb") as f:
        written = tomllib.load(f)
    assert "lr" not in written.get("optimizer", {}) and "lr_scheduler" not in written, written
    par, training = job.parallelism, job.training
    fsdp = keys.get("sharding") == "fsdp"
    assert (par.data_parallel_shard_degree, par.data_parallel_replicate_degree) == (
        (dp, 1) if fsdp else (1, dp)), par
    assert (par.tensor_parallel_degree, par.pipeline_parallel_degree) == (tp, pp), par
    # Expert parallelism, the experts split over the tensor-parallel ranks.
    assert par.expert_parallel_degree == ep, par
    if ep > 1:
        assert par.expert_tensor_parallel_degree == tp, par
    # Context parallelism: the same zig-zag ("headtail") split.
    assert par.context_parallel_degree == cp, par
    if cp > 1:
        assert par.context_parallel_load_balancer == "headtail", par
    assert training.global_batch_size == mbs * ga * dp, training
    if pp == 1:
        assert training.local_batch_size == mbs, training
    else:
        assert (training.local_batch_size, par.pipeline_parallel_microbatch_size) == (
            mbs * ga, mbs), (training, par)
    assert training.dtype == ("bfloat16" if keys["precision"] == "pure_bf16" else "float32")
    if keys["precision"] in ("bf16", "fp32", "fp8"):
        assert training.mixed_precision_param == (
            "float32" if keys["precision"] == "fp32" else "bfloat16"), training
    # fp8: torchao's float8 linear layers, tensorwise (per-tensor current)
    # scaling, the output layer left out.
    float8 = job.quantize.linear.float8
    if keys["precision"] == "fp8":
        assert job.model.converters == ["quantize.linear.float8"], job.model.converters
        assert float8.recipe_name == "tensorwise" and float8.filter_fqns == ["output"], float8
    else:
        assert not job.model.converters, job.model.converters
    assert training.enable_cpu_offload == (keys["offload"] == "cpu"), training
    ac = job.activation_checkpoint
    percent = int(keys.get("ckpt_pct", 100))
    want = {"none": ("none", None), "selective": ("selective", "op"),
            "full": ("full", None) if percent == 100 else ("selective", str(100 // percent))}
    mode, option = want[keys["checkpoint"]]
    assert ac.mode == mode and (option is None or ac.selective_ac_option == option), ac
    assert job.optimizer.name == "AdamW" and job.optimizer.implementation == (
        "fused" if keys["optimizer"] == "fused_adamw" else "for-loop"), job.optimizer
    return (f"dp {dp} ({'shard' if fsdp else 'replicate'}), tp {tp}, pp {pp}, cp {cp}, "
            f"ep {ep}, ac {ac.mode}")


# Expert-parallel strategies for a tiny Qwen3-MoE (4 experts): over the FSDP
# ranks, with tensor parallelism, over context-parallel ranks beside
# replicated data parallelism (HSDP), and over replicated ranks only, which
# the export rejects. exports.py's ep strategies (ZeRO-1; DDP beside tensor
# parallelism) are rejected by the torchtitan export for their sharding.
MOE_STRATEGIES = [
    "dp=4,tp=1,pp=1,sharding=fsdp,ep=2,mbs=1,ga=2,precision=bf16,checkpoint=none,"
    "attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=4,tp=1,pp=1,sharding=fsdp,ep=4,mbs=1,ga=1,precision=fp32,checkpoint=full,"
    "attention=sdpa,optimizer=adamw,offload=none",
    "dp=2,tp=2,pp=1,sharding=fsdp,sp=1,ep=2,mbs=1,ga=2,precision=bf16,checkpoint=none,"
    "attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=2,tp=1,pp=1,sharding=none,cp=2,ep=2,mbs=1,ga=2,precision=bf16,checkpoint=none,"
    "attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=4,tp=1,pp=1,sharding=none,ep=2,mbs=1,ga=2,precision=bf16,checkpoint=none,"
    "attention=sdpa,optimizer=fused_adamw,offload=none",
]


def parallel_dims(job, world_size):
    """torchtitan's ParallelDims of the job file's degrees, its meshes built
    (build_mesh: the dense and the expert layouts) over a fake process group
    of world_size ranks; raises what torchtitan raises for degrees it cannot
    lay out."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    import torchtitan.distributed.parallel_dims as module
    module.device_type = "cpu"  # the meshes' device; no accelerator here
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=0, world_size=world_size, store=FakeStore())
    par = job.parallelism
    dims = module.ParallelDims(
        dp_replicate=par.data_parallel_replicate_degree, dp_shard=par.data_parallel_shard_degree,
        cp=par.context_parallel_degree, tp=par.tensor_parallel_degree,
        pp=par.pipeline_parallel_degree, ep=par.expert_parallel_degree,
        etp=par.expert_tensor_parallel_degree, world_size=world_size)
    dims.build_mesh()
    return dims


def check_moe(autoaccel):
    """Section 3 of the docstring. Returns the number of failures."""
    import transformers as t
    from torchtitan.config import ConfigManager
    config = t.Qwen3MoeConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                              max_position_embeddings=128, head_dim=16, num_experts=4,
                              num_experts_per_tok=2, moe_intermediate_size=32)
    failed = 0
    for strategy in MOE_STRATEGIES:
        out = tempfile.mkdtemp(prefix="autoaccel-torchtitan-moe-")
        keys = dict(kv.split("=") for kv in strategy.split(","))
        world = 1
        for k in ("dp", "tp", "pp", "cp"):
            world *= int(keys.get(k, 1))
        ep = int(keys["ep"])
        try:
            doc = export_model(autoaccel, "qwen3_moe", config, out, strategy)
            rows = {r["dimension"]: r for r in doc["fidelity"]}
            if doc["rejected"]:
                assert rows["expert_parallel"]["status"] == "rejected", rows["expert_parallel"]
                # What the job file would have said: DDP's replicated ranks.
                job = ConfigManager().parse_args([
                    "--parallelism.data_parallel_replicate_degree", keys["dp"],
                    "--parallelism.data_parallel_shard_degree", "1",
                    "--parallelism.expert_parallel_degree", str(ep)])
                try:
                    parallel_dims(job, world)
                except (AssertionError, ValueError, RuntimeError) as e:
                    print(f"rejected  qwen3_moe {strategy}: torchtitan cannot lay it out either "
                          f"({type(e).__name__})")
                    continue
                raise AssertionError("torchtitan lays out what the export rejects")
            detail = check(strategy, doc, out)
            job = ConfigManager().parse_args(
                ["--job.config_file", os.path.join(out, "autoaccel_torchtitan.toml")])
            dims = parallel_dims(job, world)
            assert dims.get_mesh("ep").size() == ep, dims
            assert config.num_experts % ep == 0
            print(f"ok        qwen3_moe {strategy}: {detail}, "
                  f"{config.num_experts // ep} experts a rank, efsdp "
                  f"{dims.get_optional_mesh('efsdp').size()}")
        except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
            failed += 1
            print(f"FAILED    qwen3_moe {strategy}: {type(e).__name__}: {e}")
    return failed


if __name__ == "__main__":
    autoaccel = sys.argv[sys.argv.index("--autoaccel") + 1]
    failures = check_families(autoaccel)
    if failures:
        print(f"{failures} families failed")
        sys.exit(1)
    failures = check_moe(autoaccel)
    if failures:
        print(f"{failures} expert-parallel exports failed")
        sys.exit(1)
    main(check, "torchtitan")
