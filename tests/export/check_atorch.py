"""ATorch itself takes the atorch export: auto_accelerate(load_strategy=...)
with the list `autoaccel export --format atorch` writes, on CPU ranks.

For each strategy below:
  1. transformers' LlamaConfig / Qwen2Config (4.57, .venv-atorch's) writes a
     tiny model's config.json; `autoaccel export --model F --model-config
     config.json --format atorch --out DIR --json` exports the strategy;
  2. the export's own command (`torchrun --nnodes=1 --nproc-per-node=N
     train.py`, with .venv-atorch/bin first in PATH and a free port) runs
     train/atorch_train.py, an ordinary ATorch script: it reads
     load_strategy.txt with ast.literal_eval, gives the list to
     auto_accelerate with the user's model, AdamW and hyperparameters, and
     trains two optimizer steps with what auto_accelerate returns. One
     launch per world size (1 and 2, gloo) runs all its strategies in turn;
  3. each rank's record is compared with the fidelity table: ATorch's own
     parser (get_strategy + validate_strategy) accepts the list; status is
     True; the methods ATorch returns are the ones the table's rows name;
     DistributedDataParallel over the data group; the decoder layers that ran
     their forward again in backward (checkpoint, and which ones with a
     checkpoint_percent); the optimizer's lr, weight decay, betas, eps and
     fused/foreach are the user's; the micro-batch each forward saw, the
     forwards per step; the attention implementation; amp_native's GradScaler
     settings.
What ATorch cannot do on CPUs is said per strategy, never skipped: a method
it keeps but ignores (IGNORED_ON_CPU), a strategy it refuses on CPU
(ERROR_ON_CPU: the list is still parsed and validated by ATorch, and the
error must be ATorch's own, from its log), and layouts with more ranks than
this test starts (VALIDATED_ONLY: ATorch parses the list, and its rank
groups for parallel_mode are compared with autoaccel's layout).

Run with .venv-atorch's python (scripts/setup; tests/export.cmake):
check_atorch.py --autoaccel BIN"""

import argparse
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
USER = {"lr": 3.7e-4, "weight_decay": 0.037, "betas": [0.85, 0.97], "eps": 1e-7}
STEPS = 2
SEQ_LEN = 16

# Trained for two steps on 1 or 2 CPU ranks (world = dp).
RUN = [
    ("mbs=2,ga=2,precision=fp32,checkpoint=full,ckpt_pct=50,attention=sdpa,"
     "optimizer=fused_adamw,offload=none", "llama"),
    ("mbs=1,ga=2,precision=fp16,checkpoint=selective,attention=math,optimizer=adamw,"
     "offload=none", "qwen2"),
    ("dp=2,tp=1,pp=1,sharding=none,mbs=2,ga=2,precision=fp32,checkpoint=full,attention=sdpa,"
     "optimizer=adamw,offload=none", "qwen2"),
    ("dp=2,tp=1,pp=1,sharding=zero1,mbs=1,ga=2,precision=fp16,checkpoint=none,attention=math,"
     "optimizer=fused_adamw,offload=none", "llama"),
]
# What ATorch keeps in the strategy it returns but does not apply here.
IGNORED_ON_CPU = {
    # No fairscale (ATorch does not install it): zero1 leaves the optimizer
    # unsharded (plain AdamW under DDP).
    "sharding=zero1": "Zero1 ignored as fairscale is not installed!",
}
# What ATorch applies but torch disables without CUDA: amp_native wraps the
# optimizer in AmpNativeOptimizer with torch.cuda.amp's GradScaler and the
# forward in CUDA's autocast. Checked: the wrapper, the scaler's settings
# (the precision row's), and that the scaler and autocast are off.
INERT_ON_CPU = {
    "precision=fp16": "amp_native's CUDA autocast and GradScaler are off: the run is fp32",
}
# Strategies ATorch refuses on CPU ranks: its own error, from its log.
ERROR_ON_CPU = [
    ("mbs=2,ga=1,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,"
     "offload=none", "qwen2", "RuntimeError: Found no NVIDIA driver on your system"),
    ("mbs=2,ga=1,precision=pure_bf16,checkpoint=full,attention=sdpa,optimizer=adamw,"
     "offload=none", "llama",
     "TypeError: Wrapped parameters must be either torch.cuda.FloatTensor or "
     "torch.cuda.HalfTensor"),
    ("dp=2,tp=1,pp=1,sharding=zero2,mbs=1,ga=2,precision=fp32,checkpoint=none,attention=sdpa,"
     "optimizer=adamw,offload=none", "qwen2",
     "RuntimeError: Zero2 with not_use_fsdp=True not supported as fairscale is not installed!"),
    ("dp=2,tp=1,pp=1,sharding=fsdp,mbs=1,ga=2,precision=fp32,checkpoint=full,attention=sdpa,"
     "optimizer=fused_adamw,offload=cpu", "qwen2", "ValueError: FSDP only support GPU !"),
]
# More ranks than this test starts: ATorch's parser and rank groups only.
VALIDATED_ONLY = [
    ("dp=2,tp=2,pp=2,sharding=none,pp_schedule=interleaved,vpp=2,mbs=1,ga=4,precision=bf16,"
     "checkpoint=full,attention=sdpa,optimizer=fused_adamw,offload=none", "llama"),
    ("dp=4,tp=2,pp=1,sharding=fsdp,mbs=1,ga=1,precision=pure_bf16,checkpoint=selective,"
     "ckpt_pct=50,attention=sdpa,optimizer=adamw,offload=none", "qwen2"),
]
# Method names ATorch registers that a fidelity row's note can start with.
ATORCH_METHODS = ("parallel_mode", "zero1", "zero2", "fsdp", "amp_native", "half", "checkpoint",
                  "tensor_parallel", "pipeline_parallel")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_models(root):
    """Tiny Llama and Qwen2 by transformers' own config classes; returns
    {family: (directory, transformers' parameter count)}."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config
    shape = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                 max_position_embeddings=64)
    models = {}
    for family, cls in (("llama", LlamaConfig), ("qwen2", Qwen2Config)):
        config = cls(**shape)
        directory = os.path.join(root, family)
        config.save_pretrained(directory)
        models[family] = (directory, AutoModelForCausalLM.from_config(config).num_parameters())
    return models


def keys_of(strategy):
    return dict(kv.split("=") for kv in strategy.split(","))


def world_of(keys):
    return int(keys.get("dp", 1)) * int(keys.get("tp", 1)) * int(keys.get("pp", 1))


def export(autoaccel, strategy, model_dir, out):
    keys = keys_of(strategy)
    batch = int(keys["mbs"]) * int(keys["ga"]) * int(keys.get("dp", 1))
    family = os.path.basename(model_dir)
    cmd = [autoaccel, "export", "--strategy", strategy, "--world-size", str(world_of(keys)),
           "--global-batch-size", str(batch), "--seq-len", str(SEQ_LEN), "--format", "atorch",
           "--model", family, "--model-config", os.path.join(model_dir, "config.json"),
           "--out", out, "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, (cmd, run.returncode, run.stderr)
    doc = json.loads(run.stdout)
    return keys, doc, {r["dimension"]: r for r in doc["fidelity"]}


def user_arguments(keys, rows, model_dir, run):
    """What the user's script passes, following the fidelity notes."""
    if not run:
        return {"run": False}
    batch = re.search(r'dataloader_args=\{"batch_size": (\d+)\}', rows["micro_batch_size"]["note"])
    step = re.search(r"step the optimizer every (\d+) micro-batches",
                     rows["grad_accum_steps"]["note"])
    attention = re.search(r'attn_implementation="(\w+)"', rows["attention"]["note"])
    fused = '"fused": True' in rows["optimizer"]["note"]
    assert fused or '"foreach": False' in rows["optimizer"]["note"], rows["optimizer"]
    return dict(USER, run=run, model_dir=model_dir, max_steps=STEPS,
                batch_size=int(batch.group(1)), accumulation=int(step.group(1)),
                model_kwargs=dict(attn_implementation=attention.group(1),
                                  **({"use_cache": False}
                                     if "use_cache=False" in rows["checkpointing"]["note"]
                                     else {})),
                optimizer_kwargs={"fused": True} if fused else {"foreach": False})


def table_methods(rows):
    """The ATorch methods the fidelity table says the list holds."""
    named = set()
    for row in rows.values():
        if row["status"] in ("exact", "approximated"):
            word = re.split(r"[ :(]", row["note"], maxsplit=1)[0]
            if word in ATORCH_METHODS:
                named.add(word)
    return named


def launch(world, dirs, env):
    """Runs the export's command for the first directory, with the others
    after it (atorch_train.py runs each in turn); says how it went."""
    commands = []
    for d in dirs:
        with open(os.path.join(d, "command")) as f:
            commands.append(f.read())
    # The validated-only exports (more ranks) are read by one rank.
    command = next((c for c in commands if f"--nproc-per-node={world} " in c),
                   f"torchrun --nnodes=1 --nproc-per-node={world} train.py")
    dirs = [d for c, d in zip(commands, dirs) if c == command] + [
        d for c, d in zip(commands, dirs) if c != command]
    launcher, rest = command.split(" ", 1)
    assert launcher == "torchrun" and rest.endswith(" train.py"), command
    bin_dir = os.path.dirname(sys.executable)  # .venv-atorch/bin: its torchrun
    shell = (f"cd {shlex.quote(dirs[0])} && PATH={shlex.quote(bin_dir)}:$PATH torchrun "
             f"--master-port={free_port()} {rest} . "
             + " ".join(shlex.quote(d) for d in dirs[1:]))
    started = time.monotonic()
    run = subprocess.run(["bash", "-c", shell], env=env, capture_output=True, text=True,
                         timeout=600)
    seconds = time.monotonic() - started
    if run.returncode == 0:
        return f"one torchrun, {len(dirs)} exports, {seconds:.0f} s"
    tail = "\n".join((run.stdout + run.stderr).splitlines()[-40:])
    return f"`{shell}` exited {run.returncode} after {seconds:.0f} s:\n{tail}"


def records(directory, world):
    probe_dir = os.path.join(directory, "probe")
    got = []
    for name in sorted(os.listdir(probe_dir) if os.path.isdir(probe_dir) else []):
        with open(os.path.join(probe_dir, name)) as f:
            got.append(json.load(f))
    assert sorted(r["rank"] for r in got) == list(range(world)), (
        "records from ranks", sorted(r["rank"] for r in got), "of", world, "(see its launch)")
    return got


def check_run(strategy, keys, rows, recs, parameters):
    """A strategy ATorch trained with: its records against the table."""
    dp, mbs, ga = int(keys.get("dp", 1)), int(keys["mbs"]), int(keys["ga"])
    want_methods = table_methods(rows)
    ignored = next((v for k, v in IGNORED_ON_CPU.items() if k in strategy), None)
    for r in recs:
        where = f"rank {r['rank']}"
        assert r["validated"], (where, "ATorch's validate_strategy refused the list")
        assert r["status"] is True, (where, r.get("raised"), r.get("atorch_errors"))
        names = [m[0] for m in r["methods"]]
        assert set(names) == want_methods and len(names) == len(set(names)), (
            where, "ATorch returned", names, "the table names", sorted(want_methods))
        if ignored:
            assert ignored in r["atorch_errors"], (where, "not ignored as stated", r)
        else:
            assert not r["atorch_errors"] and not r["atorch_ignored"], (where, r)
        # The user's hyperparameters and optimizer switches.
        for key, value in USER.items():
            got = r[key]
            assert got == value or abs(got - value) < 1e-12, (where, key, got, value)
        assert r["optimizer_class"] == "AdamW", (where, r["optimizer_class"])
        if '"fused": True' in rows["optimizer"]["note"]:
            assert r["fused"] is True, (where, "fused", r["fused"])
        else:
            assert r["foreach"] is False and not r["fused"], (where, r["foreach"], r["fused"])
        assert r["parameters"] == parameters, (where, r["parameters"], parameters)
        assert r["steps"] == STEPS, (where, "optimizer steps", r["steps"])
        assert r["micro_batches"] == [mbs], (where, "micro-batches", r["micro_batches"])
        assert r["dataloader_batch_size"] == mbs, (where, r["dataloader_batch_size"])
        assert r["forwards"] == STEPS * ga, (where, "forwards", r["forwards"])
        want_attention = "sdpa" if keys["attention"] == "sdpa" else "eager"
        assert r["attn_implementation"] == want_attention, (where, r["attn_implementation"])
        # Data parallelism.
        if dp > 1:
            assert r["model_class"] == "DistributedDataParallel" and r["ddp_world"] == dp, (
                where, r["model_class"], r["ddp_world"])
        else:
            assert r["model_class"] != "DistributedDataParallel", (where, r["model_class"])
        # Checkpointing: which layers ran their forward again in backward.
        note = rows["checkpointing"]["note"]
        pct_note = rows["checkpoint_percent"]["note"]
        if "checkpoint" in want_methods:
            n = re.search(r"max_checkpoint_module_num (\d+)", pct_note)
            n = int(n.group(1)) if n else r["layers"]
            recomputed = [i for i, c in enumerate(r["layer_calls"]) if c > r["forwards"]]
            assert recomputed == list(range(n)), (where, "recomputed", recomputed, note, pct_note)
            # ATorch checkpoints from outside the model: the cache must be
            # off (the row's note), else the recomputed forward appends to it.
            assert r["use_cache"] is False, (where, "use_cache", r["use_cache"], note)
        else:
            assert r["recomputed_layers"] == 0, (where, "recomputed", r["layer_calls"])
        # Precision. On CPU ATorch's amp_native (CUDA autocast, CUDA
        # GradScaler) is disabled by torch: fp32 weights and no autocast.
        assert r["weight_dtypes"] == ["float32"] and r["autocast"] == ["off"], (where, r)
        assert r["cuda_autocast"] == [False], (where, "CUDA autocast on a CPU", r)
        if keys["precision"] == "fp16":
            scaler = r["grad_scaler"]
            assert r["optimizer_wrapper"] == "AmpNativeOptimizer", (where, r["optimizer_wrapper"])
            assert scaler and scaler["class"] == "GradScaler" and scaler["enabled"] is False, (
                where, scaler)
            # The precision row's "torch's defaults, as ours".
            assert (scaler["init_scale"], scaler["growth_factor"], scaler["backoff_factor"],
                    scaler["growth_interval"]) == (65536.0, 2.0, 0.5, 2000), (where, scaler)
        else:
            assert r["grad_scaler"] is None, (where, r["grad_scaler"])
        # module_replace is not exported: with this transformers ATorch
        # registers no attention pair, only LayerNorm -> Apex's.
        assert r["replacement_pairs"] == ["LayerNorm_Apex"], (where, r["replacement_pairs"])
    detail = ", ".join(m[0] + ("" if m[1] == "None" else m[1]) for m in recs[0]["methods"])
    if ignored:
        detail += f"; ignored on CPU: {ignored!r}"
    inert = next((v for k, v in INERT_ON_CPU.items() if k in strategy), None)
    if inert:
        detail += f"; on CPU {inert}"
    return f"[{detail}]"


def check_error(recs, error):
    for r in recs:
        assert r["validated"], (r["rank"], "ATorch's validate_strategy refused the list")
        assert r["status"] is False, (r["rank"], "ran on CPU: move it to RUN", r)
        assert any(error in e for e in r["atorch_errors"]), (r["rank"], r["atorch_errors"],
                                                             r.get("traceback"))
    return f"ATorch's error on CPU: {error}"


def check_layout(keys, recs):
    """ATorch's rank groups for the exported parallel_mode (its own
    _get_pg_ranks) are autoaccel's: rank = (pp * dp + d) * tp + t."""
    dp, tp, pp = (int(keys.get(k, 1)) for k in ("dp", "tp", "pp"))
    r = recs[0]
    assert r["validated"], ("ATorch's validate_strategy refused the list", r)
    rank = lambda p, d, t: (p * dp + d) * tp + t  # noqa: E731
    want = {
        "tensor": [[rank(p, d, t) for t in range(tp)] for p in range(pp) for d in range(dp)],
        "data": [[rank(p, d, t) for d in range(dp)] for p in range(pp) for t in range(tp)],
        "pipe": [[rank(p, d, t) for p in range(pp)] for d in range(dp) for t in range(tp)],
    }
    got = r["rank_groups"]
    for name, groups in got.items():
        assert sorted(groups) == sorted(want[name]), (name, groups, want[name])
    return "ATorch's parser and rank groups only: " + ", ".join(
        f"{n} {sorted(g)[0]}" for n, g in got.items())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--autoaccel", required=True)
    args = parser.parse_args()
    started = time.monotonic()
    root = tempfile.mkdtemp(prefix="autoaccel-atorch-")
    models = write_models(root)
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cases = ([(s, f, "run", None) for s, f in RUN]
             + [(s, f, "error", e) for s, f, e in ERROR_ON_CPU]
             + [(s, f, "validate", None) for s, f in VALIDATED_ONLY])
    exported, by_world, failed = [], {}, 0
    for i, (strategy, family, kind, error) in enumerate(cases):
        out = os.path.join(root, f"export{i}")
        try:
            keys, doc, rows = export(args.autoaccel, strategy, models[family][0], out)
            launch_world = world_of(keys) if kind != "validate" else 1
            user = user_arguments(keys, rows, models[family][0], kind != "validate")
        except Exception as e:  # noqa: BLE001 - each strategy is reported, then counted
            failed += 1
            print(f"FAILED  {kind:8} {family:5} {strategy}: the export: {type(e).__name__}: {e}",
                  flush=True)
            continue
        with open(os.path.join(out, "user_args.json"), "w") as f:
            json.dump(user, f)
        with open(os.path.join(out, "command"), "w") as f:
            f.write(doc["command"])
        os.symlink(os.path.join(HERE, "train", "atorch_train.py"), os.path.join(out, "train.py"))
        exported.append((strategy, family, kind, error, keys, rows, out, launch_world))
        # The strategies of a world size run in one launch: the ones that
        # train first, then those ATorch refuses.
        by_world.setdefault(launch_world, []).append(out)
    for world, dirs in sorted(by_world.items()):
        # A launch that fails leaves its strategies without records: each
        # is reported below.
        print(f"world {world}: {launch(world, dirs, env)}", flush=True)
    for strategy, family, kind, error, keys, rows, out, world in exported:
        try:
            recs = records(out, world)
            if kind == "run":
                detail = check_run(strategy, keys, rows, recs, models[family][1])
            elif kind == "error":
                detail = check_error(recs, error)
            else:
                detail = check_layout(keys, recs)
            print(f"ok      {kind:8} {family:5} {strategy}: {detail}", flush=True)
        except Exception as e:  # noqa: BLE001 - each strategy is reported, then counted
            failed += 1
            print(f"FAILED  {kind:8} {family:5} {strategy}: {type(e).__name__}: {e}", flush=True)
    print(f"atorch: {len(cases) - failed} passed, {failed} failed "
          f"({time.monotonic() - started:.0f} s)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
