#!/usr/bin/env python3
"""How close `tune --proxy` comes to measuring at full size, on this machine's CPU.

Starts a coordinator (fresh SQLite database in a temporary folder) and one
worker, then tunes the same search space twice, exhaustively: once at full
size and once with `--proxy`, and compares, strategy by strategy, the step
time the proxy job extrapolated with the one the full job measured (each the
mean over the strategy's SUCCEEDED trials: its search trial and its repeats).
Prints one row per strategy and the median and largest |error|, and the
proxy job's own check of its answer at full size where its pool held it.

Cases (--case):
  layers  an 8-layer Llama (width 256, vocabulary 8192, seq 256, batch 8) on
          one rank, measured on its first 2 layers (`--proxy layers=2`);
          precision fp32/bf16 x micro-batch 1/2/4 x recompute none/full.
  dp      a 4-layer Llama of the same width on 4 data-parallel ranks (batch
          16), measured on 2 ranks (`--proxy layers=4,world-size=2`; the
          layers kept, only replicas removed): sharding none/zero1/fsdp x
          micro-batch 1/2/4 x precision fp32/bf16.
  pipeline the 8-layer Llama on 4 pipeline stages of 2 layers (batch 8),
          measured on 2 stages of 2 layers (`--proxy layers=4,world-size=2`):
          micro-batch 1/2 x schedule 1f1b/interleaved x precision fp32/bf16.
          (Pinned CPU ranks lend a waiting stage's core share to their
          neighbours, so the pipeline's bubble costs far less here than on
          GPUs: this case measures the stand-in more than the correction.)

CPU stand-ins share cores, GPUs do not: a rank of the full job must get the
same share of a core in both jobs, or the comparison measures the machine's
contention rather than the extrapolation. So each job's worker is pinned
(taskset) to `ranks / ranks-per-core` cores: the full 4-rank jobs use 2 cores
(half a core a rank), their 2-rank proxies 1 core, and the one-rank layer
case 1 core. --cores-per-rank changes the share (default 0.5 for the
multi-rank cases, 1 for layers).

This is a benchmark, not a test: it asserts nothing. Usage:
  .venv/bin/python bench/proxy_accuracy.py --case layers|dp|pipeline [--bin build/bin]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def llama(layers):
    return {"model_type": "llama", "hidden_size": 256, "intermediate_size": 768,
            "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2,
            "vocab_size": 8192, "max_position_embeddings": 256}


CASES = {
    "layers": {
        "config": llama(8), "world": 1, "batch": 8, "proxy": "layers=2", "proxy_ranks": 1,
        "cores_per_rank": 1.0,
        "space": ["--precisions", "fp32,bf16", "--micro-batch-sizes", "1,2,4",
                  "--checkpointings", "none,full", "--checkpoint-percents", "100",
                  "--attentions", "sdpa", "--optimizers", "fused_adamw"],
    },
    "dp": {
        "config": llama(4), "world": 4, "batch": 16, "proxy": "layers=4,world-size=2",
        "proxy_ranks": 2, "cores_per_rank": 0.5,
        "space": ["--tp-sizes", "1", "--pp-sizes", "1", "--shardings", "none,zero1,fsdp",
                  "--micro-batch-sizes", "1,2,4", "--precisions", "fp32,bf16",
                  "--checkpointings", "none", "--attentions", "sdpa", "--optimizers",
                  "fused_adamw"],
    },
    "pipeline": {
        "config": llama(8), "world": 4, "batch": 8, "proxy": "layers=4,world-size=2",
        "proxy_ranks": 2, "cores_per_rank": 0.5,
        "space": ["--tp-sizes", "1", "--pp-sizes", "4", "--pipeline-schedules",
                  "1f1b,interleaved", "--virtual-stages", "2", "--micro-batch-sizes", "1,2",
                  "--precisions", "fp32,bf16", "--checkpointings", "none", "--attentions",
                  "sdpa", "--optimizers", "fused_adamw"],
    },
}


class Daemons:
    """A coordinator and one worker of `slots` CPU slots pinned to `cores`."""

    def __init__(self, bin_dir, workdir, slots, cores):
        self.bin = bin_dir
        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.log = open(os.path.join(workdir, "daemons.log"), "w")
        self.server = subprocess.Popen(
            [os.path.join(bin_dir, "autoaccel-server"), "--listen", "127.0.0.1:0", "--db",
             os.path.join(workdir, "autoaccel.db")],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.address = None
        deadline = time.time() + 30
        while not self.address and time.time() < deadline and self.server.poll() is None:
            time.sleep(0.2)
            with open(self.log.name) as f:
                m = re.search(r"autoaccel-server listening on (\S+?) ", f.read())
            self.address = m.group(1) if m else None
        if not self.address:
            raise RuntimeError("the server did not start; see " + self.log.name)
        pin = ["taskset", "-c", ",".join(str(c) for c in range(cores))]
        self.worker = subprocess.Popen(
            pin + [os.path.join(bin_dir, "autoaccel-worker"), "--coordinator", self.address,
                   "--devices", "cpu:%d" % slots, "--threads-per-device", "1",
                   "--work-dir", os.path.join(workdir, "worker")],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            out = self.cli(["workers", "--json"], check=False)
            if out and json.loads(out).get("workers"):
                return
            time.sleep(0.5)
        raise RuntimeError("the worker did not register; see " + self.log.name)

    def cli(self, args, check=True):
        done = subprocess.run([os.path.join(self.bin, "autoaccel"), "--server", self.address]
                              + args, capture_output=True, text=True)
        if check and done.returncode not in (0, 4):
            raise RuntimeError("autoaccel %s: exit %d\n%s%s" % (" ".join(args), done.returncode,
                                                                 done.stdout, done.stderr))
        return done.stdout

    def close(self):
        for p in (self.worker, self.server):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        self.log.close()


def tune(bin_dir, workdir, case, proxy, cores, args):
    c = CASES[case]
    slots = c["proxy_ranks"] if proxy else c["world"]
    daemons = Daemons(bin_dir, workdir, slots, cores)
    try:
        config = os.path.join(workdir, "config.json")
        with open(config, "w") as f:
            json.dump(c["config"], f)
        flags = ["tune", "--model", "llama", "--model-config", config, "--seq-len", "256",
                 "--global-batch-size", str(c["batch"]), "--world-size", str(c["world"]),
                 "--algorithm", "exhaustive", "--time-limit", args.time_limit,
                 "--warmup-steps", str(args.warmup_steps), "--measured-steps",
                 str(args.measured_steps), "--json"] + c["space"]
        if proxy:
            flags += ["--proxy", c["proxy"]]
        started = time.time()
        job = json.loads(daemons.cli(flags))
        job["wall_s"] = time.time() - started
        return job
    finally:
        daemons.close()


def steps_by_strategy(job, proxies):
    """SUCCEEDED trials by strategy: the proxy trials (`proxies`), or those
    measured at full size."""
    out = {}
    for t in job["trials"]:
        if t["status"] == "SUCCEEDED" and (t.get("proxy") is not None) == proxies:
            out.setdefault(t["strategy"], []).append(t)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", choices=sorted(CASES), required=True)
    p.add_argument("--bin", default=os.path.join(ROOT, "build/bin"))
    p.add_argument("--time-limit", default="40m")
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--measured-steps", type=int, default=5)
    p.add_argument("--cores-per-rank", type=float, default=0,
                   help="share of a core each rank gets in both jobs (0: the case's)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = p.parse_args()
    c = CASES[args.case]
    share = args.cores_per_rank or c["cores_per_rank"]
    full_cores = max(1, round(c["world"] * share))
    proxy_cores = max(1, round(c["proxy_ranks"] * share))
    if full_cores > os.cpu_count():
        sys.exit("proxy_accuracy: %d cores needed, %d here" % (full_cores, os.cpu_count()))
    workdir = tempfile.mkdtemp(prefix="autoaccel-proxy-bench-")
    try:
        full = tune(args.bin, os.path.join(workdir, "full"), args.case, False, full_cores, args)
        proxied = tune(args.bin, os.path.join(workdir, "proxy"), args.case, True, proxy_cores,
                       args)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    measured = steps_by_strategy(full, False)
    extrapolated = steps_by_strategy(proxied, True)
    print("# proxy_accuracy --case %s: full job %s (%.0f s, %d cores), proxy job %s "
          "(%.0f s, %d cores, --proxy %s)" % (
              args.case, full["state"], full["wall_s"], full_cores, proxied["state"],
              proxied["wall_s"], proxy_cores, c["proxy"]))
    print("# %s" % proxied["algorithm"])
    print("%-8s %9s %9s %9s %7s %7s  %s" % ("trials", "proxy ms", "extrap ms", "full ms",
                                           "error", "+-", "strategy"))
    errors, inside_count = [], 0
    for strategy in sorted(measured, key=lambda s: statistics.mean(
            t["metrics"]["step_time_median_s"] for t in measured[s])):
        if strategy not in extrapolated:
            continue
        full_ms = 1000 * statistics.mean(t["metrics"]["step_time_median_s"]
                                         for t in measured[strategy])
        ex = extrapolated[strategy]
        ex_ms = 1000 * statistics.mean(t["metrics"]["step_time_median_s"] for t in ex)
        proxy_ms = 1000 * statistics.mean(t["proxy"]["measured"]["step_time_median_s"] for t in ex)
        r = statistics.mean(t["proxy"]["relative_uncertainty"] for t in ex)
        error = ex_ms / full_ms - 1
        errors.append(abs(error))
        inside = ex_ms / (1 + r) <= full_ms <= ex_ms * (1 + r)
        inside_count += inside
        print("%3d/%-4d %9.1f %9.1f %9.1f %+6.1f%% %6.1f%%  %s%s" % (
            len(ex), len(measured[strategy]), proxy_ms, ex_ms, full_ms, 100 * error, 100 * r,
            strategy, "" if inside else "  (outside its interval)"))
    if errors:
        print("# %d strategies: |error| median %.1f%%, max %.1f%%; full measurement inside the "
              "extrapolation's interval for %d" % (len(errors), 100 * statistics.median(errors),
                                                   100 * max(errors), inside_count))
    best_full = full.get("best") or {}
    best_proxy = proxied.get("best") or {}
    print("# answers: full %s, proxy %s" % (best_full.get("strategy"), best_proxy.get("strategy")))
    check = re.search(r"checked at full size[^;]*", proxied.get("status_message", ""))
    if check:
        print("# the proxy job's own full-size check: %s" % check.group(0))


if __name__ == "__main__":
    sys.exit(main())
