"""Runs `autoaccel export` (the real CLI, no server) for a set of strategies
and hands each export's files to a framework's own parser.

Shared by the check_*.py scripts that ctest runs (tests/export.cmake)."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

# Strategies over the layouts, shardings, precisions and checkpointing the
# formats treat differently.
STRATEGIES = [
    "mbs=4,ga=2,precision=bf16,checkpoint=selective,attention=sdpa,optimizer=fused_adamw,offload=none",
    "mbs=2,ga=1,precision=fp16,checkpoint=full,ckpt_pct=50,attention=math,optimizer=adamw,offload=none",
    "mbs=1,ga=8,precision=pure_bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=cpu",
    "mbs=1,ga=1,precision=fp32,checkpoint=none,attention=math,optimizer=adamw,offload=none",
    "dp=4,tp=1,pp=1,sharding=none,mbs=2,ga=2,precision=bf16,checkpoint=full,attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=2,tp=1,pp=1,sharding=zero1,mbs=4,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=2,tp=1,pp=1,sharding=zero2,mbs=2,ga=2,precision=fp16,checkpoint=full,attention=sdpa,optimizer=adamw,offload=cpu",
    "dp=8,tp=1,pp=1,sharding=zero2,mbs=1,ga=1,precision=pure_bf16,checkpoint=none,attention=math,optimizer=fused_adamw,offload=none",
    "dp=8,tp=1,pp=1,sharding=fsdp,mbs=1,ga=4,precision=bf16,checkpoint=full,ckpt_pct=25,attention=sdpa,optimizer=fused_adamw,offload=cpu",
    "dp=2,tp=2,pp=1,sharding=fsdp,mbs=1,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=2,tp=2,pp=1,sharding=zero1,mbs=1,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=2,tp=2,pp=1,sharding=none,mbs=1,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=1,tp=1,pp=2,sharding=none,pp_schedule=1f1b,mbs=1,ga=4,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
    # Context parallelism: the ring with FSDP over dp x cp, the all-gather with tensor and
    # sequence parallelism.
    "dp=2,tp=1,pp=1,sharding=fsdp,cp=2,cp_comm=p2p,mbs=1,ga=2,precision=bf16,checkpoint=full,attention=math,optimizer=fused_adamw,offload=none",
    "dp=1,tp=2,pp=1,sharding=zero1,sp=1,cp=2,cp_comm=all_gather,mbs=1,ga=4,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,offload=none",
    # Expert parallelism: the experts over 2 of 4 data-parallel ranks with ZeRO-1, and with
    # tensor and sequence parallelism.
    "dp=4,tp=1,pp=1,sharding=zero1,ep=2,mbs=1,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=2,tp=2,pp=1,sharding=none,sp=1,ep=2,mbs=1,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,offload=none",
    # fp8 linear layers under FSDP.
    "dp=2,tp=1,pp=1,sharding=fsdp,mbs=2,ga=2,precision=fp8,checkpoint=selective,attention=sdpa,optimizer=fused_adamw,offload=none",
]


def sizes(strategy):
    keys = dict(kv.split("=") for kv in strategy.split(","))
    dp, tp, pp, cp = (int(keys.get(k, 1)) for k in ("dp", "tp", "pp", "cp"))
    return dp * tp * pp * cp, int(keys["mbs"]) * int(keys["ga"]) * dp


def exports(autoaccel, fmt):
    """Yields (strategy, document, directory) for each strategy: the --json
    document and a directory holding the files the CLI wrote with --out."""
    for strategy in STRATEGIES:
        world, batch = sizes(strategy)
        out = tempfile.mkdtemp(prefix="autoaccel-export-")
        cmd = [autoaccel, "export", "--strategy", strategy, "--world-size", str(world),
               "--global-batch-size", str(batch), "--seq-len", "512", "--format", fmt,
               "--out", out, "--json"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        doc = json.loads(run.stdout)
        if doc.get("rejected"):
            assert run.returncode == 2, (strategy, run.returncode, run.stderr)
            assert doc["files"] == {} and not os.listdir(out), "a rejected export wrote files"
        else:
            assert run.returncode == 0, (strategy, run.returncode, run.stderr)
            for name, content in doc["files"].items():
                with open(os.path.join(out, name)) as f:
                    assert f.read() == content, name
        yield strategy, doc, out


def main(check, fmt):
    """Runs check(strategy, doc, dir) -> str|None for each non-rejected export
    and reports 'N passed, N failed'."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--autoaccel", required=True)
    args = parser.parse_args()
    passed = failed = rejected = 0
    for strategy, doc, out in exports(args.autoaccel, fmt):
        if doc["rejected"]:
            rejected += 1
            why = [r for r in doc["fidelity"] if r["status"] == "rejected"]
            print(f"rejected  {strategy}: {why[0]['dimension']}: {why[0]['note']}")
            continue
        try:
            detail = check(strategy, doc, out)
            passed += 1
            print(f"ok        {strategy}" + (f": {detail}" if detail else ""))
        except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
            failed += 1
            print(f"FAILED    {strategy}: {type(e).__name__}: {e}")
    print(f"{fmt}: {rejected} rejected by the exporter")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed or passed == 0 else 0)
