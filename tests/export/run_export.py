"""Trains a tiny model with a framework's own entry point from what
`autoaccel export` wrote, and checks from inside the run that it applied what
the export's fidelity report says, with the user's own hyperparameters.

For each strategy of the format (world size 1 and 2, gloo on CPU ranks):
  1. transformers' Qwen2Config writes the model's config.json; `autoaccel
     export --model qwen2 --model-config config.json --out DIR --json` exports
     the strategy for it;
  2. the export's own launch command (torchrun / accelerate launch / deepspeed /
     python for Lightning and FlagAI, which start their ranks themselves)
     runs, with the user script of train/ as its train.py, the exported files
     in DIR, and the arguments a user adds: a deliberately unusual learning
     rate, weight decay, betas and eps, a constant scheduler, two optimizer
     steps, and what the fidelity notes leave to the script (the DataLoader's
     batch size, accumulation, the optimizer's class, checkpointing, the
     attention implementation);
  3. every rank writes down what it really ran (train/probe.py): those are
     compared with the user's values and with each exact row.
The only change to the exported command is a free rendezvous port (the
launchers' default 29500 is in the range the test suite's workers use).

colossalai and flagai run in their own layered venvs (scripts/setup:
.venv-colossalai, .venv-flagai over .venv), whose python runs this driver:
the launchers are taken from that interpreter's bin directory.

Usage: run_export.py --autoaccel BIN --format FORMAT"""

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# What the user's own arguments choose; none is a framework's default.
USER = {"lr": 3.7e-4, "weight_decay": 0.037, "betas": [0.85, 0.97], "eps": 1e-7}
STEPS = 2
SEQ_LEN = 16

# The strategies each format is run with, world size 1 and 2 (dp=2, or tp=2).
# Not run here: FSDP. accelerate (and the Trainer through it) applies FSDP
# only to GPU ranks (AcceleratorState keeps MULTI_CPU ranks plain), so on this
# machine's CPUs the fsdp exports of those formats are checked by their
# parsers only (check_*.py).
CASES = {
    "hf-trainer": [
        "mbs=2,ga=2,precision=fp32,checkpoint=none,attention=math,optimizer=adamw,offload=none",
        "dp=2,tp=1,pp=1,sharding=none,mbs=2,ga=1,precision=bf16,checkpoint=full,attention=sdpa,"
        "optimizer=fused_adamw,offload=none",
        "dp=2,tp=1,pp=1,sharding=zero2,mbs=2,ga=2,precision=pure_bf16,checkpoint=none,"
        "attention=sdpa,optimizer=adamw,offload=none",
        "dp=2,tp=1,pp=1,sharding=zero1,mbs=1,ga=2,precision=bf16,checkpoint=full,ckpt_pct=50,"
        "attention=math,optimizer=fused_adamw,offload=none",
    ],
    "accelerate": [
        "mbs=2,ga=2,precision=bf16,checkpoint=full,attention=sdpa,optimizer=fused_adamw,"
        "offload=none",
        "dp=2,tp=1,pp=1,sharding=zero1,mbs=2,ga=2,precision=bf16,checkpoint=none,attention=math,"
        "optimizer=fused_adamw,offload=none",
        "dp=2,tp=1,pp=1,sharding=none,mbs=1,ga=2,precision=fp32,checkpoint=full,attention=sdpa,"
        "optimizer=adamw,offload=none",
    ],
    "lightning": [
        "mbs=2,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
        "offload=none",
        "dp=2,tp=1,pp=1,sharding=none,mbs=1,ga=2,precision=fp32,checkpoint=full,attention=math,"
        "optimizer=adamw,offload=none",
        "dp=2,tp=1,pp=1,sharding=none,mbs=2,ga=1,precision=pure_bf16,checkpoint=none,"
        "attention=sdpa,optimizer=fused_adamw,offload=none",
    ],
    "torch": [
        "mbs=2,ga=2,precision=fp32,checkpoint=full,ckpt_pct=50,attention=math,optimizer=adamw,"
        "offload=none",
        "dp=2,tp=1,pp=1,sharding=zero1,mbs=2,ga=1,precision=bf16,checkpoint=none,attention=sdpa,"
        "optimizer=fused_adamw,offload=none",
        "dp=2,tp=1,pp=1,sharding=fsdp,mbs=1,ga=2,precision=pure_bf16,checkpoint=full,"
        "attention=sdpa,optimizer=fused_adamw,offload=none",
    ],
    # cp=2: DeepSpeed-Ulysses over two CPU ranks (its all-to-alls over gloo),
    # as the context_parallel row's note tells the script to set it up.
    "deepspeed": [
        "mbs=2,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
        "dp=2,tp=1,pp=1,sharding=zero2,mbs=2,ga=2,precision=pure_bf16,checkpoint=full,"
        "attention=math,optimizer=fused_adamw,offload=none",
        "dp=1,tp=1,pp=1,sharding=none,cp=2,mbs=1,ga=2,precision=fp32,checkpoint=none,"
        "attention=sdpa,optimizer=adamw,offload=none",
    ],
    # colossalai 0.5.0 on CPU ranks runs TorchDDPPlugin and HybridParallelPlugin
    # with tp_size=pp_size=1 and zero_stage=0 only. Not run here: ZeRO
    # (LowLevelZeroPlugin, HybridParallelPlugin zero_stage >= 1: "AssertionError:
    # device is required", its ZeRO optimizer wants cuda or npu), GeminiPlugin
    # (the CPU accelerator has no streams), tensor parallelism (Shardformer's
    # Linear1D_Col calls the CPU accelerator's get_rng_state with a device it
    # does not take) and pipeline parallelism (its p2p code names
    # Backend.HCCL, which torch 2.11's Backend lacks). Those exports are pinned by
    # export_test only.
    "colossalai": [
        "mbs=2,ga=2,precision=fp32,checkpoint=full,attention=math,optimizer=adamw,offload=none",
        "dp=2,tp=1,pp=1,sharding=none,mbs=1,ga=2,precision=bf16,checkpoint=none,attention=sdpa,"
        "optimizer=fused_adamw,offload=none",
        "dp=2,tp=1,pp=1,sharding=none,mbs=2,ga=1,precision=pure_bf16,checkpoint=full,"
        "attention=sdpa,optimizer=adamw,offload=none",
    ],
    # FlagAI 1.8.4's Trainer trains on a CPU with env_type pytorch only (one
    # process): pytorchDDP and the DeepSpeed env types call
    # torch.cuda.set_device in initialize_distributed (and pytorchDDP's
    # relaunch passes --local-rank, which FlagAI's parser refuses; the
    # fidelity note says how to get past it). So one rank, fp32: precision
    # other than fp32, ZeRO and offload go through env_type deepspeed.
    "flagai": [
        "mbs=2,ga=2,precision=fp32,checkpoint=full,attention=sdpa,optimizer=fused_adamw,"
        "offload=none",
        "mbs=1,ga=3,precision=fp32,checkpoint=none,attention=math,optimizer=adamw,offload=none",
    ],
    # torchtitan 0.2.2 trains its own llama3 (the export's flavor of the
    # Llama config, write_model) from its own entry point; its attention is
    # SDPA (math is not expressible). Not run here: pipeline parallelism (the
    # probe counts forward passes at the first stage's embedding).
    # (strategy, "qwen3_moe"): a tiny Qwen3-MoE instead, as torchtitan's qwen3
    # model with its MoE: on one rank in bf16 (torch._grouped_mm over the
    # experts), and its 4 experts spread over 2 FSDP ranks (ep=2; fp32: the
    # for-loop experts), all-to-all over gloo. train/torchtitan_cpu.py says
    # which two GPU kernels of torchtitan's MoE get CPU stand-ins.
    # torchrun alone starts the ranks (launch.sh); the user's plain script
    # applies the rest from its own arguments: fp32 here, as it has no
    # precision switch.
    "torchrun": [
        "mbs=2,ga=2,precision=fp32,checkpoint=full,attention=sdpa,optimizer=fused_adamw,"
        "offload=none",
        "dp=2,tp=1,pp=1,sharding=none,mbs=1,ga=2,precision=fp32,checkpoint=none,attention=math,"
        "optimizer=adamw,offload=none",
    ],
    "torchtitan": [
        "mbs=2,ga=2,precision=bf16,checkpoint=full,ckpt_pct=50,attention=sdpa,"
        "optimizer=fused_adamw,offload=none",
        "dp=2,tp=1,pp=1,sharding=none,mbs=1,ga=2,precision=fp32,checkpoint=full,attention=sdpa,"
        "optimizer=adamw,offload=none",
        "dp=2,tp=1,pp=1,sharding=fsdp,mbs=2,ga=1,precision=pure_bf16,checkpoint=none,"
        "attention=sdpa,optimizer=fused_adamw,offload=none",
        "dp=1,tp=2,pp=1,sharding=none,sp=1,mbs=2,ga=2,precision=fp32,checkpoint=full,"
        "attention=sdpa,optimizer=adamw,offload=none",
        ("mbs=2,ga=2,precision=bf16,checkpoint=full,attention=sdpa,optimizer=fused_adamw,"
         "offload=none", "qwen3_moe"),
        ("dp=2,tp=1,pp=1,sharding=fsdp,ep=2,mbs=1,ga=2,precision=fp32,checkpoint=none,"
         "attention=sdpa,optimizer=adamw,offload=none", "qwen3_moe"),
    ],
}
SCRIPTS = {"hf-trainer": "hf_trainer.py", "accelerate": "accelerate_train.py",
           "deepspeed": "deepspeed_train.py", "lightning": "lightning_train.py",
           "torch": "torch_train.py", "colossalai": "colossalai_train.py",
           "flagai": "flagai_train.py", "torchtitan": "torchtitan_cpu.py",
           "torchrun": "torchrun_train.py"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_model(directory, fmt, family=None):
    """A tiny Qwen2 (q/k/v biases, grouped-query attention), or for
    torchtitan, whose models have no biases, a Llama 3.1 (grouped-query
    attention, llama3 rope scaling, an MLP width llama3's rule does not give
    by itself), or the `family` a case names (qwen3_moe: 4 experts of their
    own width, top 2, renormalised), by transformers' own config classes;
    returns (model_type, transformers' parameter count)."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3MoeConfig
    sizes = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                 max_position_embeddings=64)
    if family == "qwen3_moe":
        config = Qwen3MoeConfig(**sizes, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                moe_intermediate_size=32, norm_topk_prob=True)
    elif fmt == "torchtitan":
        config = LlamaConfig(**{**sizes, "intermediate_size": 176, "num_hidden_layers": 4},
                             rope_theta=500000.0, rms_norm_eps=1e-5,
                             rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                           "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                           "original_max_position_embeddings": 32})
    else:
        config = Qwen2Config(**sizes)
    config.save_pretrained(directory)
    return config.model_type, AutoModelForCausalLM.from_config(config).num_parameters()


def write_text_data(directory):
    """What torchtitan's trainer reads besides the model: a tokenizer
    (tokenizer.json, a word-level vocabulary of 250 words within the model's
    256 rows, and tokenizer_config.json naming its BOS and EOS) and a text
    dataset (train.json, lines of {"text": ...}, which torchtitan's
    "c4_test" loader reads from --training.dataset_path). Built here: nothing
    comes from a hub."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    words = [f"w{i}" for i in range(247)]
    vocab = {w: i for i, w in enumerate(["<unk>", "<|begin_of_text|>", "<|end_of_text|>"]
                                        + words)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    os.makedirs(os.path.join(directory, "tokenizer"))
    tokenizer.save(os.path.join(directory, "tokenizer", "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer", "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}, f)
    os.makedirs(os.path.join(directory, "data"))
    with open(os.path.join(directory, "data", "train.json"), "w") as f:
        for i in range(64):
            f.write(json.dumps({"text": " ".join(words[(i * 7 + j) % 247] for j in range(200))})
                    + "\n")


def world_size(keys):
    return (int(keys.get("dp", 1)) * int(keys.get("tp", 1)) * int(keys.get("pp", 1)) *
            int(keys.get("cp", 1)))


def export(autoaccel, fmt, strategy, model_dir, model_type, out):
    keys = dict(kv.split("=") for kv in strategy.split(","))
    batch = int(keys["mbs"]) * int(keys["ga"]) * int(keys.get("dp", 1))
    cmd = [autoaccel, "export", "--strategy", strategy, "--world-size", str(world_size(keys)),
           "--global-batch-size", str(batch), "--seq-len", str(SEQ_LEN), "--format", fmt,
           "--model", model_type, "--model-config", os.path.join(model_dir, "config.json"),
           "--out", out, "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, (cmd, run.returncode, run.stderr)
    return keys, json.loads(run.stdout)


def script_arguments(optimizer_note=None):
    """The user's hyperparameters and steps as train/probe.py's
    add_user_arguments reads them, and the AdamW implementation the
    optimizer row's note names (when the script builds the optimizer)."""
    args = ["--lr", str(USER["lr"]), "--weight-decay", str(USER["weight_decay"]),
            "--betas", *map(str, USER["betas"]), "--eps", str(USER["eps"]),
            "--max-steps", str(STEPS)]
    if optimizer_note is not None:
        args += ["--optimizer", "fused" if "fused=True" in optimizer_note else "foreach_false"]
    return args


def user_arguments(fmt, keys, rows, out):
    """What the user adds to the exported command, following the fidelity
    notes for what the export leaves to the script."""
    if fmt == "hf-trainer":
        return ["--learning_rate", str(USER["lr"]), "--weight_decay", str(USER["weight_decay"]),
                "--adam_beta1", str(USER["betas"][0]), "--adam_beta2", str(USER["betas"][1]),
                "--adam_epsilon", str(USER["eps"]), "--lr_scheduler_type", "constant",
                "--max_steps", str(STEPS), "--output_dir", os.path.join(out, "run"),
                "--report_to", "none", "--save_strategy", "no", "--use_cpu"]
    optimizer_note = rows["optimizer"]["note"]
    if fmt == "lightning":
        # accelerator cpu: this machine's CPUs stand in for the export's GPUs.
        args = ["--trainer.accelerator=cpu", f"--trainer.max_steps={STEPS}",
                "--trainer.logger=false", "--trainer.enable_checkpointing=false",
                "--trainer.enable_progress_bar=false", f"--model.lr={USER['lr']}",
                f"--model.weight_decay={USER['weight_decay']}",
                f"--model.betas=[{USER['betas'][0]},{USER['betas'][1]}]",
                f"--model.eps={USER['eps']}",
                "--model.optimizer=" + ("fused" if "fused=True" in optimizer_note
                                        else "foreach_false")]
        if "gradient_checkpointing_enable()" in rows["checkpointing"]["note"]:
            args.append("--model.gradient_checkpointing=true")
        return args
    if fmt == "flagai":
        # Trainer(**flagai_trainer.json, lr=..., weight_decay=...) and the
        # user's own AdamW; the rest as the notes say. device cpu: this
        # machine's CPUs stand in for the export's GPU.
        args = script_arguments(optimizer_note) + ["--device", "cpu"]
        if "gradient_checkpointing_enable()" in rows["checkpointing"]["note"]:
            args.append("--gradient-checkpointing")
        if "register_step_post_hook" in rows["grad_accum_steps"]["note"]:
            args.append("--zero-grad-after-step")
        return args
    if fmt == "torch":  # apply() reads strategy.json; the optimizer's hyperparameters are ours
        return script_arguments()
    if fmt == "torchrun":  # the script applies the strategy from its own arguments
        args = script_arguments() + [
            "--optimizer", "fused" if keys["optimizer"] == "fused_adamw" else "foreach_false",
            "--batch-size", keys["mbs"], "--gradient-accumulation-steps", keys["ga"]]
        return args + (["--gradient-checkpointing"] if keys["checkpoint"] == "full" else [])
    if fmt == "torchtitan":
        # The job file's header: tokenizer, data, steps and the user's
        # optimizer hyperparameters and schedule (constant: no warm-up, and
        # a decay from 1 to min_lr_factor 1) on the command line.
        root = os.path.dirname(out)
        return ["--model.hf_assets_path", os.path.join(root, "tokenizer"),
                "--training.dataset", "c4_test",
                "--training.dataset_path", os.path.join(root, "data"),
                "--training.steps", str(STEPS), "--optimizer.lr", str(USER["lr"]),
                "--optimizer.weight_decay", str(USER["weight_decay"]),
                "--optimizer.beta1", str(USER["betas"][0]),
                "--optimizer.beta2", str(USER["betas"][1]), "--optimizer.eps", str(USER["eps"]),
                "--lr_scheduler.warmup_steps", "0", "--lr_scheduler.min_lr_factor", "1.0",
                "--metrics.log_freq", "1",
                "--job.dump_folder", os.path.join(out, "run")]
    args = script_arguments(optimizer_note)
    if fmt == "accelerate":
        args += ["--batch-size", keys["mbs"]]
        if rows["grad_accum_steps"]["status"] == "not_expressible":
            assert f"gradient_accumulation_steps={keys['ga']}" in rows["grad_accum_steps"]["note"]
            args += ["--gradient-accumulation-steps", keys["ga"]]
    if (fmt != "colossalai" and rows["checkpointing"]["status"] == "not_expressible"
            and "gradient_checkpointing_enable()" in rows["checkpointing"]["note"]):
        args.append("--gradient-checkpointing")
    return args


def run_once(env, fmt, keys, rows, out, probe_dir, prefix, launcher, rest):
    """Runs the export's command once on a free port with the user's
    arguments, in `out` with a clean probe folder and dump folder. Returns
    (the CompletedProcess, the shell line, its output, the probes)."""
    for name in os.listdir(probe_dir):
        os.remove(os.path.join(probe_dir, name))
    shutil.rmtree(os.path.join(out, "run"), ignore_errors=True)
    port = free_port()
    port_flag = {"torchrun": f"--master-port={port}", "deepspeed": f"--master_port={port}"}
    if launcher == "python":  # Lightning starts its ranks itself
        env["MASTER_PORT"] = str(port)
        launcher = shlex.quote(sys.executable)
    elif launcher == "accelerate":
        rest = rest.replace("launch ", f"launch --main_process_port {port} ", 1)
    else:
        rest = f"{port_flag[launcher]} {rest}"
    bin_dir = os.path.dirname(sys.executable)
    if fmt == "torchrun":  # its file: launch.sh ARGS; torchrun takes the port from PET_MASTER_PORT
        prefix, launcher, rest = f"PET_MASTER_PORT={port} ", "sh", "launch.sh"
    shell = (f"cd {shlex.quote(out)} && PATH={shlex.quote(bin_dir)}:$PATH "
             f"{prefix}{launcher} {rest} "
             + " ".join(shlex.quote(a) for a in user_arguments(fmt, keys, rows, out)))
    run = subprocess.run(["bash", "-c", shell], env=env, capture_output=True, text=True,
                         timeout=600)
    probes = []
    for name in sorted(os.listdir(probe_dir)):
        with open(os.path.join(probe_dir, name)) as f:
            probes.append(json.load(f))
    return run, shell, run.stdout + run.stderr, probes


def launch(doc, fmt, keys, out, model_dir):
    rows = {r["dimension"]: r for r in doc["fidelity"]}
    os.symlink(os.path.join(HERE, "train", SCRIPTS[fmt]), os.path.join(out, "train.py"))
    probe_dir = os.path.join(out, "probe")
    os.makedirs(probe_dir)
    env = dict(os.environ, AUTOACCEL_TEST_MODEL_DIR=model_dir, AUTOACCEL_PROBE_DIR=probe_dir)
    if fmt == "accelerate" and "ds_config.json" not in doc["files"]:
        # This machine's CPUs stand in for GPUs: accelerate makes its ranks
        # gloo DDP ranks (MULTI_CPU) only when told to use the CPU, as
        # hf-trainer's --use_cpu does; without it, each rank trains alone.
        # (Its DeepSpeed path runs on CPU ranks as it is.)
        env["ACCELERATE_USE_CPU"] = "true"
    if "from_pretrained_kwargs.json" in doc["files"]:
        env["AUTOACCEL_TEST_MODEL_KWARGS"] = os.path.join(out, "from_pretrained_kwargs.json")
    elif fmt == "torchrun":  # the user's own choice
        with open(os.path.join(out, "user_kwargs.json"), "w") as f:
            json.dump({"attn_implementation": "sdpa" if keys["attention"] == "sdpa" else "eager"},
                      f)
        env["AUTOACCEL_TEST_MODEL_KWARGS"] = os.path.join(out, "user_kwargs.json")
    elif fmt in ("torch", "colossalai", "torchtitan"):
        pass  # apply() sets it; the colossalai module names it; torchtitan: its flavor's
    else:  # the attention row's note: attn_implementation at load
        note = rows["attention"]["note"]
        implementation = "sdpa" if 'attn_implementation="sdpa"' in note else "eager"
        assert f'attn_implementation="{implementation}"' in note, note
        with open(os.path.join(out, "user_kwargs.json"), "w") as f:
            json.dump({"attn_implementation": implementation}, f)
        env["AUTOACCEL_TEST_MODEL_KWARGS"] = os.path.join(out, "user_kwargs.json")
    command = doc["command"]
    prefix = ""  # VAR=value words before the launcher (colossalai: PYTHONPATH=.)
    while "=" in command.split(" ", 1)[0]:
        word, command = command.split(" ", 1)
        prefix += word + " "
    launcher, rest = command.split(" ", 1)
    # torchtitan: its entry point, through the CPU stand-in (train/torchtitan_cpu.py).
    rest = rest.replace("-m torchtitan.train ", "train.py ")
    for attempt in (1, 2):
        run, shell, output, probes = run_once(env, fmt, keys, rows, out, probe_dir, prefix,
                                              launcher, rest)
        if run.returncode == 0 and probes:
            break
        # A rank may abort on a busy machine when gloo/DeepSpeed threads are
        # alive at interpreter exit ("terminate called without an active
        # exception", seen 1 run in ~10 with two CPU hogs beside it). After
        # every rank wrote its probe, what the run applied is known: the
        # abort is reported, not hidden. Before that (seen once in CI, in
        # torchtitan's 2-rank teardown), the run is tried once more, and a
        # second abort fails.
        aborted = "terminate called without an active exception" in output
        if aborted and len(probes) == world_size(keys):
            print(f"warning: a rank aborted after training (exit {run.returncode}, "
                  "'terminate called without an active exception')", flush=True)
            break
        if not aborted or attempt == 2:
            tail = "\n".join(line for line in output.splitlines() if not line.startswith("[20"))
            tail = "\n".join(tail.splitlines()[-60:])
            raise AssertionError(f"`{shell}` exited {run.returncode} with "
                                 f"{len(probes)} of {world_size(keys)} probes:\n{tail}")
        print(f"warning: a rank aborted (exit {run.returncode}, 'terminate called without an "
              f"active exception') with {len(probes)} of {world_size(keys)} probes written; "
              "running again", flush=True)
    return rows, probes


def check(fmt, keys, rows, probes, parameters):
    """Raises AssertionError naming the first thing the run did not apply."""
    dp = int(keys.get("dp", 1))
    mbs, ga = int(keys["mbs"]), int(keys["ga"])
    assert sorted(p["rank"] for p in probes) == list(range(world_size(keys))), probes
    exact = lambda d: rows[d]["status"] in ("exact", "not_expressible")  # noqa: E731
    for p in probes:
        where = f"rank {p['rank']}"
        # The user's hyperparameters, never a framework default.
        for key, value in USER.items():
            got = p[key]
            if key == "weight_decay" and isinstance(got, list):
                # The Trainer's own rule: biases and norms in a group of
                # their own without decay; the others take the user's.
                got = [g for g in got if g != 0.0]
                got = got[0] if len(got) == 1 else got
            assert got == value or (isinstance(value, float) and abs(got - value) < 1e-12), (
                f"{where}: optimizer {key} {got}, the user set {value}")
        assert p["parameters"] == parameters, (where, p["parameters"], parameters)
        assert p["steps"] == STEPS, (where, "optimizer steps", p["steps"])
        if exact("micro_batch_size"):
            assert p["micro_batches"] == [mbs], (where, "micro-batches", p["micro_batches"])
        if exact("grad_accum_steps"):
            assert p["forwards"] == STEPS * ga, (where, "forwards", p["forwards"], STEPS * ga)
        # Precision: what each forward saw.
        precision = keys["precision"]
        if precision == "fp32":
            assert p["autocast"] == ["off"] and p["weight_dtypes"] == ["float32"], (where, p)
        elif precision == "bf16" and exact("precision"):
            assert p["autocast"] == ["bfloat16"], (where, "autocast", p["autocast"])
            assert p["weight_dtypes"] == ["float32"], (where, "weights", p["weight_dtypes"])
        elif precision == "pure_bf16":
            assert p["weight_dtypes"] == ["bfloat16"], (where, "weights", p["weight_dtypes"])
        # Sharding.
        sharding = keys.get("sharding", "none")
        if "zero_stage" in p:
            want = {"none": 0, "zero1": 1, "zero2": 2, "fsdp": 3}[sharding]
            assert p["zero_stage"] == want, (where, "ZeRO stage", p["zero_stage"], want)
            assert p["ds_micro_batch"] == mbs and p["ds_accumulation"] == ga, (where, p)
            assert p["ds_bf16"] == (precision == "pure_bf16"), (where, "bf16", p["ds_bf16"])
            # Context parallelism as Ulysses (deepspeed_train.py reports it):
            # each forward saw 1/cp of the sequence.
            cp = int(keys.get("cp", 1))
            if "sequence_parallel_size" in p or cp > 1:
                assert p["sequence_parallel_size"] == cp, (where, p["sequence_parallel_size"], cp)
                assert p["tokens_per_forward"] == [SEQ_LEN // cp], (where, p["tokens_per_forward"])
        elif fmt == "torch" and sharding == "zero1":
            assert p["ddp"] and p["optimizer_wrapper"] == "ZeroRedundancyOptimizer", (where, p)
        elif fmt == "torch" and sharding == "zero2":
            assert p["fsdp"], (where, "no FSDP2", p)
        elif sharding in ("zero1", "zero2"):
            raise AssertionError(f"{where}: {sharding} ran without DeepSpeed")
        elif sharding == "none" and dp > 1:
            assert p.get("ddp"), (where, "not DistributedDataParallel", p)
        if sharding == "fsdp":
            assert p.get("fsdp") or p.get("distributed_type") == "FSDP", (where, "no FSDP", p)
            if "fsdp_version" in p:
                assert p["fsdp_version"] == 2, (where, p["fsdp_version"])
        # Checkpointing: the decoder layers whose forward ran again in
        # backward, counted by hooks on the layers themselves.
        recomputed, layers = p["recomputed_layers"], p["layers"]
        if keys["checkpoint"] == "none":
            assert recomputed == 0, (where, "layers recomputed without checkpointing", recomputed)
        elif keys["checkpoint"] == "full":
            percent = int(keys.get("ckpt_pct", 100))
            if rows["checkpointing"]["status"] == "not_expressible":
                want = layers  # the script's gradient_checkpointing_enable(): every layer
            elif rows["checkpoint_percent"]["status"] == "exact":
                want = -(-layers * percent // 100)  # the first ceil(L * pct / 100)
            elif "one block in " in rows["checkpoint_percent"]["note"]:  # torchtitan
                every = int(rows["checkpoint_percent"]["note"].split("one block in ")[1].split()[0])
                want = layers // every
            else:
                want = None  # approximated: some layers, the note says which
            assert recomputed == want or (want is None and recomputed > 0), (
                where, "recomputed layers", recomputed, "want", want)
        # The optimizer implementation.
        if exact("optimizer") and "DeepSpeedCPUAdam" not in rows["optimizer"]["note"]:
            assert p["optimizer_class"] == "AdamW", (where, p["optimizer_class"])
            if keys["optimizer"] == "fused_adamw":
                assert p["fused"] is True, (where, "fused", p["fused"])
            else:
                assert p["foreach"] is False, (where, "foreach", p["foreach"])
        if fmt == "colossalai":
            # The plugin the export picks for what runs on CPU ranks (see CASES).
            hybrid = precision == "pure_bf16"
            want = "HybridParallelPlugin" if hybrid else "TorchDDPPlugin"
            assert p["plugin"] == want, (where, "plugin", p["plugin"], want)
            if hybrid:
                assert (p["plugin_tp_size"], p["plugin_pp_size"], p["plugin_zero_stage"],
                        p["plugin_precision"]) == (1, 1, 0, "bf16"), (where, p)
            assert p["ddp"], (where, "not DistributedDataParallel", p)
        if fmt == "flagai":
            # Approximated rows the user script completes as their notes say:
            # the Trainer's accumulation, its gradients zeroed after each step.
            assert p["env_type"] == "pytorch", (where, p["env_type"])
            assert p["trainer_batch_size"] == mbs and p["micro_batches"] == [mbs], (where, p)
            assert p["trainer_accumulation"] == ga, (where, p)
            assert p["forwards"] == STEPS * ga, (where, "forwards", p["forwards"], STEPS * ga)
            assert p["grads_cleared"] == [True] * STEPS, (where, "gradients kept", p)
        if fmt == "torchtitan":
            assert p["tp"] == (int(keys.get("tp", 1)) > 1), (where, "tensor parallel", p["tp"])
            assert p["gradient_accumulation"] == ga, (where, p["gradient_accumulation"], ga)
            # Expert parallelism: each rank's experts computed experts / ep
            # experts' tokens, their weights sharded on the experts' dimension
            # over torchtitan's "ep" mesh.
            ep = int(keys.get("ep", 1))
            assert p["expert_parallel"] == ep, (where, "expert parallel", p["expert_parallel"])
            if p["experts"]:
                assert p["local_experts"] == [p["experts"] // ep], (
                    where, "experts a rank computed", p["local_experts"], p["experts"] // ep)
            if ep > 1:
                assert (p["expert_layout"] or {}).get("ep") == "S(0)", (
                    where, "experts' layout", p["expert_layout"])
        want_attention = "sdpa" if keys["attention"] == "sdpa" else "eager"
        assert p["attn_implementation"] == want_attention, (where, p["attn_implementation"])
    return f"{probes[0]['optimizer_class']} lr {probes[0]['lr']}, {len(probes)} rank(s)"


# torchrun:F: format F's files and entry point started by torchrun, where
# torchrun is not F's own launcher (deepspeed's, Lightning's own ranks); F's
# cases, script and checks.
TORCHRUN_WRAPPED = ["torchrun:deepspeed", "torchrun:lightning"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--autoaccel", required=True)
    parser.add_argument("--format", required=True, choices=sorted(CASES) + TORCHRUN_WRAPPED)
    args = parser.parse_args()
    base = args.format.removeprefix("torchrun:")
    root = tempfile.mkdtemp(prefix=f"autoaccel-run-{base}-")
    models = {}  # family (None: the format's own) -> (directory, model_type, parameters)
    if base == "torchtitan":
        write_text_data(root)
    failed = 0
    for i, case in enumerate(CASES[base]):
        strategy, family = case if isinstance(case, tuple) else (case, None)
        if family not in models:
            model_dir = os.path.join(root, f"model-{family}" if family else "model")
            models[family] = (model_dir, *write_model(model_dir, base, family))
        model_dir, model_type, parameters = models[family]
        out = os.path.join(root, f"export{i}")
        os.makedirs(out)
        try:
            keys, doc = export(args.autoaccel, args.format, strategy, model_dir, model_type, out)
            if args.format != base:
                assert doc["command"].startswith("torchrun "), doc["command"]
            rows, probes = launch(doc, base, keys, out, model_dir)
            print(f"ok      {strategy}{f' ({family})' if family else ''}: "
                  f"{check(base, keys, rows, probes, parameters)}", flush=True)
        except Exception as e:  # noqa: BLE001 - each strategy is reported, then counted
            failed += 1
            print(f"FAILED  {strategy}{f' ({family})' if family else ''}: "
                  f"{type(e).__name__}: {e}", flush=True)
    print(f"{args.format}: {len(CASES[base]) - failed} passed, {failed} failed")
    if failed:
        print(f"the runs' files are kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
