#!/usr/bin/env python3
"""A black-box (launcher) trial's overhead, side by side with relaunching per trial.

For the Hugging Face Trainer example (examples/hf_trainer, launcher
"hf-llama-tiny" of deploy/examples/launchers.json) and K strategies
(precisions bf16, fp32 x the first K/2 micro-batch sizes of 1, 2, 4, 8; every
other dimension fixed: no checkpointing, adamw, sdpa, no sharding, no offload),
measures in one run:

  1. autoaccel: an autoaccel-server (own temporary database) and one
     autoaccel-worker (--devices cpu:WORLD_SIZE, the example launchers), and
     `autoaccel tune --launcher hf-llama-tiny --algorithm exhaustive` over the
     K strategies. Per trial: wall = finished_at - started_at (the job's JSON:
     the coordinator's clock, from dispatch to the rank's result), the
     measured steps' time (sum of the measured step_time_s in rank 0's
     WORK_DIR/<trial>-a<attempt>-r0/metrics.jsonl), and the breakdown:
       dispatch  started_at -> the rank's process start (RPC, trial directory,
                 exported files, fork/exec),
       ready     process start -> the `ready` event (interpreter, imports,
                 model, data and Trainer build; the script reports the
                 seconds since its process started),
       warm-up   the warm-up steps' step_time_s,
       measured  the measured steps' step_time_s,
       between   the time between steps outside the timed region (Trainer
                 bookkeeping, the first batch's data loader),
       stop      the last step line's arrival -> finished_at (worker poll,
                 SIGTERM, reaping, the result to the coordinator).
     Line arrival times come from this script polling the metrics files every
     20 ms; the process start is the ready line's arrival minus its seconds.
     The job also runs its confirmation repeats of the best strategies: they
     are listed (marked "repeat") but left out of the side-by-side medians,
     which cover the same K strategies on both sides. "gap" is the coordinator's
     time from a trial's finished_at to the next trial's started_at.
  2. relaunch: for the same K strategies, the way DeepSpeed's autotuner runs
     each experiment: `autoaccel export --strategy TEXT --format hf-trainer`
     (no server) renders the Trainer's flags, and the example runs as a fresh
     process per strategy (one per rank) with the launcher's own argv and env
     and the AUTOACCEL_* variables naming a metrics file, so the
     AutoaccelCallback stops it after warm-up + measured steps and it exits by
     itself. Wall = launch -> every rank exited. The same breakdown, with
     "stop" = the last step line -> exit (Trainer end, interpreter shutdown).
  3. Interpreter start and the script's imports, measured alone a few times
     (python -c pass; import torch; the example's imports: torch,
     transformers' Trainer classes (which import accelerate), autoaccel.hf), to
     split `ready` into imports and the model/data/Trainer build, and the
     warm-process estimate: the share of a trial's overhead that keeping each
     rank's Python process warm between trials would save (interpreter start +
     imports; the model build depends on the strategy and would stay).

Both sides run --rounds times (default 2): round 1 tunes, then relaunches;
round 2 relaunches first, then tunes (a fresh server and database each
round), so that load drifting on a shared machine hits both alike; the
import timings run at the end of every round.

Overhead = wall - measured steps. This is a benchmark, not a test: it asserts
nothing about the figures (it exits 1 only when a run fails). Usage:
  .venv/bin/python bench/launcher_overhead.py --bin build/bin [--strategies 4]
      [--world-size 1] [--rounds 2] [--warmup-steps 2] [--measured-steps 5] [--keep]
"""
import argparse
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHERS_FILE = os.path.join(ROOT, "deploy", "examples", "launchers.json")
LAUNCHER = "hf-llama-tiny"
PRECISIONS = ["bf16", "fp32"]
MICRO_BATCH_SIZES = [1, 2, 4, 8]
# What examples/hf_trainer/train.py imports before main() runs.
SCRIPT_IMPORTS = ("import argparse, json, os, sys, time; import torch; "
                  "from transformers import (AutoConfig, AutoModelForCausalLM, "
                  "HfArgumentParser, Trainer, TrainingArguments); "
                  "from autoaccel import trial; from autoaccel.hf import AutoaccelCallback")
# Appended to each timed `python -c`: prints the seconds since the process
# started (as the `ready` event counts them), before the interpreter's exit.
SINCE_START = ("; import os as _os; _f = open('/proc/self/stat').read().rsplit(')', 1)[1].split()"
               "; print(float(open('/proc/uptime').read().split()[0])"
               " - int(_f[19]) / _os.sysconf('SC_CLK_TCK'))")


def fail(message):
    print("launcher_overhead.py: " + message, file=sys.stderr)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LineClock:
    """Polls every metrics.jsonl under some folders every 20 ms and records
    when each complete line first appeared (time.time())."""

    def __init__(self, folders):
        self.folders = folders
        self.arrivals = {}  # path -> [(arrival, parsed line)]
        self._offsets = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._poll()

    def add_folder(self, folder):
        self.folders.append(folder)

    def lines(self, path):
        self._poll_file(path, time.time())
        return self.arrivals.get(path, [])

    def _run(self):
        while not self._stop.wait(0.02):
            self._poll()

    def _poll(self):
        now = time.time()
        for folder in list(self.folders):
            try:
                for root, _, files in os.walk(folder):
                    for name in files:
                        if name.endswith(".jsonl"):
                            self._poll_file(os.path.join(root, name), now)
            except OSError:
                pass

    def _poll_file(self, path, now):
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return
        for raw in data[:end].split(b"\n"):
            if raw.strip():
                self.arrivals.setdefault(path, []).append((now, json.loads(raw)))
        self._offsets[path] = offset + end + 1


def breakdown(lines, warmup, measured):
    """From one rank's (arrival, line) list: ready seconds, warm-up and
    measured step time, time between steps, process start, last step arrival."""
    ready = [(t, l) for t, l in lines if l.get("event") == "ready"]
    steps = [(t, l) for t, l in lines if l.get("event") == "step"]
    if len(steps) < warmup + measured:
        return None
    warm = sum(l["step_time_s"] for _, l in steps[:warmup])
    meas = sum(l["step_time_s"] for _, l in steps[warmup:warmup + measured])
    last_step = steps[warmup + measured - 1][0]
    if ready:
        ready_arrival, ready_line = ready[0]
        ready_s = ready_line["seconds"]
        process_start = ready_arrival - ready_s
    else:  # a script without `ready`: the first step line's arrival instead
        ready_arrival = steps[0][0] - steps[0][1]["step_time_s"]
        ready_s, process_start = None, None
    between = max(0.0, (last_step - ready_arrival) - warm - meas)
    return {"ready": ready_s, "warmup": warm, "measured": meas, "between": between,
            "process_start": process_start, "last_step": last_step}


def run_checked(argv, what, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        fail("%s exited %d:\n%s%s" % (what, r.returncode, r.stdout[-2000:], r.stderr[-3000:]))
    return r.stdout


def start_logged(argv, log_path, env=None):
    log = open(log_path, "w")
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                            start_new_session=True)


def wait_line(proc, pattern, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            fail("%s exited before printing '%s'" % (what, pattern))
        m = re.search(pattern, line)
        if m:
            return m
    fail("%s did not print '%s' within %d s" % (what, pattern, timeout))


def stop(proc):
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def read_launcher():
    with open(LAUNCHERS_FILE, encoding="utf-8") as f:
        launcher = json.load(f)["launchers"][LAUNCHER]
    workdir = os.path.normpath(os.path.join(os.path.dirname(LAUNCHERS_FILE),
                                            launcher.get("workdir", ".")))
    return launcher, workdir


def render_argv(argv, values, txt_files):
    """The launcher's argv with its placeholders filled in (the worker's rules:
    {name} inside a token, {*stem} as a whole token: the .txt file's lines)."""
    out = []
    for token in argv:
        m = re.fullmatch(r"\{\*([A-Za-z_][A-Za-z0-9_]*)\}", token)
        if m:
            with open(txt_files[m.group(1)], encoding="utf-8") as f:
                out.extend(line.strip() for line in f if line.strip())
            continue

        def sub(m):
            if m.group(1) not in values:
                fail("the launcher's placeholder {%s} is not one this benchmark renders"
                     % m.group(1))
            return str(values[m.group(1)])
        out.append(re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", sub, token))
    return out


def tune(args, tmp, micro_batch_sizes, clock):
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    clock.add_folder(work)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    server = worker = None
    try:
        server = start_logged([os.path.join(args.bin, "autoaccel-server"), "--listen",
                               "127.0.0.1:0", "--db", os.path.join(tmp, "autoaccel.db"),
                               "--log-level", "warn"], os.path.join(tmp, "server.log"))
        port = wait_line(server, r"listening on [^:]+:(\d+)", "autoaccel-server").group(1)
        address = "127.0.0.1:" + port
        worker = start_logged(
            [os.path.join(args.bin, "autoaccel-worker"), "--coordinator", address, "--listen",
             "127.0.0.1:0", "--devices", "cpu:%d" % args.world_size, "--threads-per-device",
             str(args.threads), "--launchers", LAUNCHERS_FILE, "--python", sys.executable,
             "--work-dir", work, "--peak-tflops", args.peak_tflops, "--log-level", "warn"],
            os.path.join(tmp, "worker.log"), env=env)
        wait_line(worker, r"listening on", "autoaccel-worker")
        client = [os.path.join(args.bin, "autoaccel"), "--server", address, "--json"]
        deadline = time.time() + 60
        while not json.loads(run_checked(client + ["workers"], "autoaccel workers"))["workers"]:
            if time.time() > deadline:
                fail("the worker did not register within 60 s; see " + tmp)
            time.sleep(0.2)
        client_cpu_before = children_cpu()
        job = json.loads(run_checked(
            client + ["tune", "--launcher", LAUNCHER, "--device", "cpu",
                      "--world-size", str(args.world_size),
                      "--global-batch-size", str(args.global_batch_size),
                      "--seq-len", str(args.seq_len), "--algorithm", "exhaustive",
                      "--precisions", ",".join(PRECISIONS),
                      "--micro-batch-sizes", ",".join(map(str, micro_batch_sizes)),
                      "--checkpointings", "none", "--optimizers", "adamw",
                      "--attentions", "sdpa", "--shardings", "none", "--offloads", "none",
                      "--warmup-steps", str(args.warmup_steps),
                      "--measured-steps", str(args.measured_steps),
                      "--max-trials", str(args.strategies), "--time-limit", "30m"],
            "autoaccel tune"))
        job["client_cpu_seconds"] = children_cpu() - client_cpu_before
        job["ranks_cpu_seconds"] = process_cpu(worker.pid, children=True)
        job["worker_cpu_seconds"] = process_cpu(worker.pid)
        job["server_cpu_seconds"] = process_cpu(server.pid)
    finally:
        stop(worker)
        stop(server)
    trials = sorted(job.get("trials") or [], key=lambda t: t["started_at"])
    rows = []
    for i, t in enumerate(trials):
        if t["status"] != "SUCCEEDED":
            fail("trial %s %s: %s (logs under %s)" % (t["trial_id"], t["status"], t["reason"],
                                                      work))
        rank0 = os.path.join(work, "%s-a%d-r0" % (t["trial_id"], t["attempt"]), "metrics.jsonl")
        b = breakdown(clock.lines(rank0), args.warmup_steps, args.measured_steps)
        if b is None:
            fail("%s: fewer steps than warm-up + measured" % rank0)
        wall = t["finished_at"] - t["started_at"]
        b.update(strategy=t["strategy"], strategy_json=t["strategy_json"],
                 repeat=bool(t["confirms"]), wall=wall,
                 dispatch=(b["process_start"] - t["started_at"]
                           if b["process_start"] is not None else None),
                 stop=t["finished_at"] - b["last_step"],
                 gap=(trials[i + 1]["started_at"] - t["finished_at"]
                      if i + 1 < len(trials) else None))
        rows.append(b)
    return job, rows


def relaunch(args, tmp, strategies, clock):
    launcher, workdir = read_launcher()
    rows = []
    for n, (text, strategy_json) in enumerate(strategies):
        out = os.path.join(tmp, "relaunch", "s%d" % n)
        files = os.path.join(out, "files")
        os.makedirs(out)
        clock.add_folder(out)
        run_checked([os.path.join(args.bin, "autoaccel"), "export", "--strategy", text,
                     "--world-size", str(args.world_size), "--global-batch-size",
                     str(args.global_batch_size), "--seq-len", str(args.seq_len), "--format",
                     "hf-trainer", "--out", files], "autoaccel export")
        written = {name: os.path.join(files, name) for name in sorted(os.listdir(files))}
        stems = {os.path.splitext(name)[0]: path for name, path in written.items()}
        strategy_file = os.path.join(out, "strategy.json")
        with open(strategy_file, "w", encoding="utf-8") as f:
            json.dump({"trial_id": "relaunch-%d" % n, "world_size": args.world_size,
                       "seq_len": args.seq_len, "global_batch_size": args.global_batch_size,
                       "warmup_steps": args.warmup_steps, "measured_steps": args.measured_steps,
                       "device_type": "cpu", "strategy": strategy_json, "strategy_text": text,
                       "format": "hf-trainer", "files": written}, f)
        master_port = free_port()
        procs, metrics = [], []
        cpu_before, start = children_cpu(), time.time()
        for rank in range(args.world_size):
            rank_dir = os.path.join(out, "r%d" % rank)
            os.makedirs(rank_dir)
            values = dict(stems, python=sys.executable, trial_dir=rank_dir,
                          strategy_file=strategy_file)
            env = dict(os.environ, **launcher.get("env", {}))
            env.update(PYTHONPATH=os.path.join(ROOT, "python"), OMP_NUM_THREADS=str(args.threads),
                       RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.world_size),
                       LOCAL_WORLD_SIZE=str(args.world_size), GROUP_RANK="0",
                       ROLE_RANK=str(rank), ROLE_WORLD_SIZE=str(args.world_size),
                       AUTOACCEL_STRATEGY_FILE=strategy_file,
                       AUTOACCEL_TRIAL_DIR=rank_dir,
                       AUTOACCEL_METRICS_FILE=os.path.join(rank_dir, "metrics.jsonl"),
                       AUTOACCEL_WARMUP_STEPS=str(args.warmup_steps),
                       AUTOACCEL_MEASURED_STEPS=str(args.measured_steps),
                       AUTOACCEL_DEVICE_TYPE="cpu", AUTOACCEL_TRIAL_ID="relaunch-%d" % n)
            if args.world_size > 1:
                env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master_port))
            else:
                env.pop("MASTER_ADDR", None)
                env.pop("MASTER_PORT", None)
            argv = render_argv(launcher["argv"], values, stems)
            procs.append(subprocess.Popen(
                argv, cwd=workdir, env=env,
                stdout=open(os.path.join(rank_dir, "stdout.log"), "w"),
                stderr=open(os.path.join(rank_dir, "stderr.log"), "w")))
            metrics.append(env["AUTOACCEL_METRICS_FILE"])
        codes = [p.wait() for p in procs]
        end = time.time()
        cpu = children_cpu() - cpu_before
        if any(codes):
            fail("relaunch of %s: exit codes %s; see %s" % (text, codes, out))
        b = breakdown(clock.lines(metrics[0]), args.warmup_steps, args.measured_steps)
        if b is None:
            fail("relaunch of %s: fewer steps than warm-up + measured; see %s" % (text, out))
        b.update(imports=time_imports(args))  # right after the run, under the same load
        b.update(strategy=text, wall=end - start, stop=end - b["last_step"], cpu=cpu,
                 dispatch=(b["process_start"] - start
                           if b["process_start"] is not None else None))
        rows.append(b)
    return rows


def time_imports(args):
    """`python -c CODE` for the interpreter alone, torch, and the example's
    imports, in the launcher's workdir and env, WORLD_SIZE processes at once
    (as a trial's ranks import at once): {name: (seconds from the process
    start to the imports done, launch to exit, CPU seconds; the slowest
    process's times, the CPU per process)}."""
    launcher, workdir = read_launcher()
    env = dict(os.environ, **launcher.get("env", {}))
    env.update(PYTHONPATH=os.path.join(ROOT, "python"), OMP_NUM_THREADS=str(args.threads))
    codes = {"interpreter": "pass", "torch": "import torch", "script": SCRIPT_IMPORTS}
    out = {}
    for name, code in codes.items():
        cpu_before, start = children_cpu(), time.time()
        procs = [subprocess.Popen([sys.executable, "-c", code + SINCE_START], cwd=workdir,
                                  env=env, stdout=subprocess.PIPE, text=True)
                 for _ in range(args.world_size)]
        printed = [p.communicate()[0] for p in procs]
        if any(p.returncode for p in procs):
            fail("python -c %s exited %s" % (code, [p.returncode for p in procs]))
        out[name] = (max(float(x.split()[-1]) for x in printed), time.time() - start,
                     (children_cpu() - cpu_before) / args.world_size)
    return out


def process_cpu(pid, children=False):
    """User + system CPU seconds of process `pid` so far (/proc/PID/stat), or
    with children=True of the children it has waited for (a worker's ranks)."""
    with open("/proc/%d/stat" % pid, encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    first = 13 if children else 11  # cutime, cstime / utime, stime
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    """User + system CPU seconds of this process's waited-for children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def fmt(x, width=7):
    return ("%*.2f" % (width, x)) if x is not None else " " * (width - 1) + "-"


def median(rows, key):
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def print_tables(args, ours, theirs, jobs):
    cols = ["wall", "measured", "overhead", "dispatch", "ready", "warmup", "between", "stop"]
    for r in ours + theirs:
        r["overhead"] = r["wall"] - r["measured"]
    print("\n1. autoaccel black-box trials (tune --launcher %s, world size %d), seconds"
          % (LAUNCHER, args.world_size))
    print("   %-44s %s %7s" % ("round strategy", " ".join("%7s" % c for c in cols), "gap"))
    for r in ours:
        name = "%d %s%s" % (r["round"], short(r["strategy"]), " (repeat)" if r["repeat"] else "")
        print("   %-44s %s %s" % (name, " ".join(fmt(r[c]) for c in cols), fmt(r["gap"])))
    search = [r for r in ours if not r["repeat"]]
    repeats = [r for r in ours if r["repeat"]]
    print("   %-44s %s %s" % ("median of the %d strategies" % len(search),
                              " ".join(fmt(median(search, c)) for c in cols),
                              fmt(median(ours, "gap"))))
    if repeats:
        print("   %-44s %s" % ("median of the %d repeats" % len(repeats),
                              " ".join(fmt(median(repeats, c)) for c in cols)))
    for n, job in enumerate(jobs):
        print("   job %d: %.1f s from submission to its end, %d trials"
              % (n + 1, job["finished_at"] - job["created_at"], len(job.get("trials") or [])))

    print("\n2. relaunching the script per strategy (fresh process per rank, exits by itself)")
    print("   %-44s %s" % ("round strategy", " ".join("%7s" % c for c in cols)))
    for r in theirs:
        print("   %-44s %s" % ("%d %s" % (r["round"], short(r["strategy"])),
                              " ".join(fmt(r[c]) for c in cols)))
    print("   %-44s %s" % ("median", " ".join(fmt(median(theirs, c)) for c in cols)))
    print("   (dispatch: launch -> the process start the script reports; stop: last step -> exit;"
          " CPU time of the ranks' processes, median: %.2f s)" % median(theirs, "cpu"))

    print("\n3. side by side (medians over the same %d strategies x %d rounds, seconds)"
          % (len(theirs) // args.rounds, args.rounds))
    print("   %-28s %9s %9s %7s" % ("", "autoaccel", "relaunch", "ratio"))
    for c in ["wall", "measured", "overhead"]:
        a, b = median(search, c), median(theirs, c)
        print("   %-28s %9.2f %9.2f %7.2f" % (c, a, b, a / b if b else float("nan")))
    print("   %-28s %9.1f%% %8.1f%%" % ("overhead share of wall",
                                       100 * median(search, "overhead") / median(search, "wall"),
                                       100 * median(theirs, "overhead") / median(theirs, "wall")))

    print("\n4. interpreter start and imports: python -c CODE (%d at once, as the ranks), right"
          " after each relaunch run; medians of %d, seconds" % (args.world_size, len(theirs)))
    print("   %-24s %9s %9s %9s %7s   %s" % ("", "imported", "exit", "launch to", "CPU to",
                                          "imported, each run"))
    print("   %-24s %9s %9s %9s %7s" % ("", "(A)", "(B-A)", "exit (B)", "exit"))
    imports, import_cpu = {}, {}
    for name, what in (("interpreter", "interpreter alone"), ("torch", "import torch"),
                       ("script", "the example's imports")):
        runs = [r["imports"][name] for r in theirs]
        imports[name] = statistics.median(x[0] for x in runs)
        import_cpu[name] = statistics.median(x[2] for x in runs)
        total = statistics.median(x[1] for x in runs)
        print("   %-24s %9.2f %9.2f %9.2f %7.2f   %s"
              % (what, imports[name], total - imports[name], total, import_cpu[name],
                 " ".join("%.2f" % x[0] for x in runs)))
    print("   (A: process start -> imports done, as `ready` counts, the slowest process; CPU: per"
          " process; the example's imports: torch, transformers' Trainer classes with"
          " accelerate, autoaccel)")
    ready_ours, ready_theirs = median(search, "ready"), median(theirs, "ready")
    build = ready_theirs - imports["script"]
    print("   ready (median): autoaccel %.2f s, relaunch %.2f s = the example's imports %.2f +"
          " model/data/Trainer build %.2f" % (ready_ours, ready_theirs, imports["script"], build))
    ours_cpu = sum(job["ranks_cpu_seconds"] for job in jobs) / len(ours)
    theirs_cpu = median(theirs, "cpu")
    print("   autoaccel's own processes' CPU per trial (mean): server %.3f s, worker %.3f s,"
          " tune client %.3f s" % tuple(sum(job[k] for job in jobs) / len(ours) for k in
                                       ("server_cpu_seconds", "worker_cpu_seconds",
                                        "client_cpu_seconds")))
    print("   CPU of a trial's rank processes (all %d rank(s)): autoaccel %.2f s (mean over %d"
          " trials; stopped by the worker), relaunch %.2f s (median; to their own exit)"
          % (args.world_size, ours_cpu, len(ours), theirs_cpu))

    # Not more than the interpreter and imports take in the trials themselves.
    saved = min(imports["script"], ready_ours)
    overhead = median(search, "overhead")
    wall = median(search, "wall")
    print("\nWarm-process estimate: keeping each rank's Python process warm between trials "
          "(interpreter and imports done once; the model, data and Trainer still built per "
          "strategy) would cut the per-trial overhead by about %.1f s (%.0f%% of the median "
          "%.1f s overhead, %.0f%% of the median %.1f s trial wall)."
          % (saved, 100 * saved / overhead, overhead, 100 * saved / wall, wall))
    print("Load average at the end: %s" % " ".join("%.2f" % x for x in os.getloadavg()))


def short(text, width=44):
    """The strategy's distinguishing fields (precision, mbs, ga)."""
    keep = [f for f in text.split(",") if f.split("=")[0] in ("precision", "mbs", "ga", "dp")]
    out = ",".join(keep) if keep else text
    return out if len(out) <= width else out[:width - 1] + "~"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                   help="folder of autoaccel, autoaccel-server, autoaccel-worker")
    p.add_argument("--strategies", type=int, default=4,
                   help="K: bf16 and fp32 x the first K/2 micro-batch sizes of 1,2,4,8 (even)")
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--global-batch-size", type=int, default=None,
                   help="default: 8 x world size")
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--measured-steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="CPU threads per rank (both sides)")
    p.add_argument("--rounds", type=int, default=2,
                   help="rounds of (tune, relaunch), alternating which goes first")
    p.add_argument("--peak-tflops", default="fp32=1,bf16=1",
                   help="the worker's --peak-tflops (skips its GEMM probe; only MFU uses it)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = p.parse_args()
    args.bin = os.path.abspath(args.bin)
    if args.global_batch_size is None:
        args.global_batch_size = 8 * args.world_size
    per_rank = args.global_batch_size // args.world_size
    fitting = [m for m in MICRO_BATCH_SIZES if per_rank % m == 0]
    if args.strategies < 2 or args.strategies % 2 or args.strategies // 2 > len(fitting):
        fail("--strategies must be even, 2 to %d (micro-batch sizes %s fit %d samples per rank)"
             % (2 * len(fitting), fitting, per_rank))
    micro_batch_sizes = fitting[:args.strategies // 2]
    for name in ("autoaccel", "autoaccel-server", "autoaccel-worker"):
        if not os.access(os.path.join(args.bin, name), os.X_OK):
            fail("%s is not in %s (build it: ninja -C build %s)" % (name, args.bin, name))

    tmp = tempfile.mkdtemp(prefix="autoaccel-overhead-")
    print("launcher_overhead: world size %d, %d strategies (precisions %s x micro-batch %s), "
          "global batch %d, seq %d, %d warm-up + %d measured steps, %d thread(s) per rank, "
          "%d CPU cores, load average %s; files in %s"
          % (args.world_size, args.strategies, ",".join(PRECISIONS),
             ",".join(map(str, micro_batch_sizes)), args.global_batch_size, args.seq_len,
             args.warmup_steps, args.measured_steps, args.threads, os.cpu_count(),
             " ".join("%.2f" % x for x in os.getloadavg()), tmp), flush=True)
    try:
        ours, theirs, jobs, strategies = [], [], [], None
        with LineClock([]) as clock:
            # Round 1 tunes first (it picks the strategies' exact texts), round
            # 2 relaunches first, and so on, so that drifting load from other
            # processes hits both sides alike.
            for n in range(args.rounds):
                round_dir = os.path.join(tmp, "round%d" % (n + 1))
                steps = ["tune", "relaunch"] if n % 2 == 0 else ["relaunch", "tune"]
                for step in steps:
                    if step == "tune":
                        job, rows = tune(args, round_dir, micro_batch_sizes, clock)
                        jobs.append(job)
                        for r in rows:
                            r["round"] = n + 1
                        ours += rows
                        if strategies is None:
                            strategies = [(r["strategy"], r["strategy_json"]) for r in rows
                                          if not r["repeat"]]
                    else:
                        rows = relaunch(args, round_dir, strategies, clock)
                        for r in rows:
                            r["round"] = n + 1
                        theirs += rows
                    print("round %d: %s done (%d runs), load average %s"
                          % (n + 1, step, len(rows), " ".join("%.2f" % x
                                                                for x in os.getloadavg())),
                          flush=True)
        print_tables(args, ours, theirs, jobs)
    finally:
        if args.keep:
            print("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
