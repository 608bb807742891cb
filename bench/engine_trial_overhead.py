#!/usr/bin/env python3
"""Where an engine trial's time goes outside its measured steps.

Runs build/bin/autoaccel-trial on one strategy of a model, time-stamping each
progress line of its stderr as it arrives ("step 3/12 measured 0.298s ..."),
and splits the process's wall time into:
  * start     process start, LibTorch init, model build, data, up to the
              start of the first step (the first line's time minus its
              step's own duration);
  * warm-up   the untimed steps;
  * measured  the timed steps;
  * end       after the last step: the result written, the process gone.
"overhead beyond warm-up" = start + end: what a trial costs besides its steps.
Runs each model `--repeats` times and prints the medians.

This is a benchmark, not a test: it asserts nothing. Usage:
  .venv/bin/python bench/engine_trial_overhead.py [--repeats 3] [--no-1b] [--1b-layers N]
The 1B-shaped model is Llama 3.2 1B's layer and vocabulary shape with N of its
16 layers (default 4: 0.5B parameters, whose fp32 AdamW state fits a 24 GiB
machine; all 16 need about 20 GiB for weights, gradients and Adam alone).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP = re.compile(r"step (\d+)/(\d+) (warmup|measured) ([0-9.]+)s")

# A Llama 3.2 1B shape.
LLAMA_1B = {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
            "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
            "vocab_size": 128256, "max_position_embeddings": 2048, "rms_norm_eps": 1e-05,
            "tie_word_embeddings": True, "hidden_act": "silu",
            "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}


def one_run(runner, spec, workdir):
    spec_path = os.path.join(workdir, "spec.json")
    result_path = os.path.join(workdir, "result.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    start = time.perf_counter()
    proc = subprocess.Popen([runner, "--spec", spec_path, "--result", result_path],
                            stderr=subprocess.PIPE, text=True)
    steps = []  # (arrival time, kind, duration)
    for line in proc.stderr:
        m = STEP.search(line)
        if m:
            steps.append((time.perf_counter() - start, m.group(3), float(m.group(4))))
    proc.wait()
    wall = time.perf_counter() - start
    with open(result_path) as f:
        result = json.load(f)
    if result["status"] != "SUCCEEDED" or not steps:
        raise RuntimeError("trial %s: %s" % (result["status"], result.get("error")))
    first_at, _, first_duration = steps[0]
    return {"wall": wall,
            "start": first_at - first_duration,
            "warmup": sum(d for _, kind, d in steps if kind == "warmup"),
            "measured": sum(d for _, kind, d in steps if kind == "measured"),
            "end": wall - steps[-1][0]}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runner", default=os.path.join(ROOT, "build/bin/autoaccel-trial"))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-1b", action="store_true", help="leave out the 1B-shaped model")
    p.add_argument("--1b-layers", dest="layers", type=int, default=4,
                   help="layers of the 1B-shaped model (16: the whole of it)")
    args = p.parse_args()
    with open(os.path.join(ROOT, "deploy/examples/gpt2-small.json")) as f:
        demo = {k: v for k, v in json.load(f).items() if k != "model_type"}
    cases = [("demo gpt2 (scripts/demo), seq 128, batch 8", "gpt2", demo, 128, 8, 8, 2, 5)]
    if not args.no_1b:
        cfg = dict(LLAMA_1B, num_hidden_layers=args.layers)
        cases.append(("llama 1B shape, %d layers, seq 128, batch 1" % args.layers, "llama", cfg,
                      128, 1, 1, 1, 1))
    print("# engine_trial_overhead: %s, %d thread(s), median of %d runs, seconds"
          % (args.runner, args.threads, args.repeats))
    print("%-46s %7s %7s %7s %8s %7s %9s" % ("model", "wall", "start", "warm-up", "measured",
                                             "end", "overhead"))
    with tempfile.TemporaryDirectory() as workdir:
        for name, family, cfg, seq, batch, mbs, warmup, measured in cases:
            spec = {"trial_id": "overhead", "model_family": family, "model_config": cfg,
                    "seq_len": seq, "global_batch_size": batch,
                    "strategy": {"micro_batch_size": mbs, "grad_accum_steps": batch // mbs,
                                 "precision": "fp32", "checkpointing": "none",
                                 "attention": "sdpa", "optimizer": "adamw"},
                    "warmup_steps": warmup, "measured_steps": measured, "device": "cpu",
                    "num_threads": args.threads}
            runs = [one_run(args.runner, spec, workdir) for _ in range(args.repeats)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print("%-46s %7.2f %7.2f %7.2f %8.2f %7.2f %9.2f" % (
                name, med["wall"], med["start"], med["warmup"], med["measured"], med["end"],
                med["start"] + med["end"]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
