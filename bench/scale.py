#!/usr/bin/env python3
"""The coordinator at scale: simulated workers dispatching continuously.

One command (the first run creates build/bench-venv from bench/requirements.txt):
  python3 bench/scale.py [--bin build/bin] [--workers 1000] [--devices 8]
      [--trial-seconds 1.0] [--seconds 60] [--warmup 15] [--jobs 4]
      [--checkpoint-percents 50] [--perf FILE]

On 127.0.0.1, in a temporary folder: an autoaccel-server (no tokens) and
build/bin/fake_fleet (bench/fake_fleet.cc): --workers simulated workers of
--devices cpu devices each, every one at its own loopback address
(127.1.X.Y), answering each rank after --trial-seconds (±10%). Then --jobs
jobs of the tiny GPT-2 with world size 1 and every dimension open, with
--checkpoint-percents percents (50: 11,312 candidates a job; 4: 1,008),
exhaustive search, a time limit past the run (no tokens: every job and
read is the anonymous user's). For --seconds the fleet is kept busy; after
--warmup it measures:

  dispatch gap     per device, from the fleet answering a rank to the device's
                   next RunTrial arriving (what the coordinator takes to record
                   a result and send the next candidate), p50 / p99 / max
  results/s        ranks answered per second in the window, and trials the
                   store recorded finished in the window (read from the
                   database, by status), with the heartbeats that failed and
                   the workers declared lost
  coordinator      CPU seconds over the window (/proc/PID/stat), RSS, VmHWM;
                   and the fleet's CPU (it shares the machine's cores)
  other users      GetJob and WatchJob latency from another client meanwhile
                   (GetJob every 50 ms; a WatchJob every 0.5 s, timed to its
                   first event), each in its own thread

--perf FILE records the coordinator with `perf record --call-graph dwarf` for
20 s of the window (then `perf report -i FILE --no-children`). Not a timed
test: docs/BENCHMARKS.md has figures.
"""
import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_bench  # noqa: E402

grpc_bench.ensure_venv()
import grpc  # noqa: E402
import load  # noqa: E402

TINY_GPT = json.dumps({"model_type": "gpt2", "n_layer": 4, "n_embd": 64, "n_head": 4,
                       "vocab_size": 64, "n_positions": 64})


def job_request(pb2, time_limit, percents):
    """World size 1, every dimension open: the tiny model's whole space, with
    `percents` checkpoint percents (50: 11,312 candidates; 4: 1,008)."""
    return pb2.TuneRequest(
        model=pb2.ModelSpec(family="gpt2", config_json=TINY_GPT), seq_len=32,
        global_batch_size=64, time_limit_seconds=time_limit, device_type="cpu", force=True,
        algorithm="exhaustive", warmup_steps=1, measured_steps=5,
        precisions=["fp32", "bf16", "fp16", "pure_bf16"],
        checkpointings=["none", "full", "selective"],
        checkpoint_percents=[100 * (i + 1) // percents for i in range(percents)],
        attentions=["math", "sdpa"], optimizers=["adamw", "fused_adamw"],
        offloads=["none"])


def trials_finished(db, since, until):
    """{status: trials} the store recorded finished in [since, until) (Unix seconds), read
    from the database itself (WAL: no lock of the coordinator's is taken)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60) as c:
        return dict(c.execute("SELECT status, COUNT(*) FROM trials WHERE finished_at >= ? AND "
                              "finished_at < ? AND status != 'PRUNED' GROUP BY status",
                              (int(since * 1e6), int(until * 1e6))).fetchall())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(grpc_bench.REPO, "build", "bin"))
    ap.add_argument("--workers", type=int, default=1000)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--trial-seconds", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=15)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--checkpoint-percents", type=int, default=50,
                    help="checkpoint percents per job (50: 11,312 candidates; 4: 1,008)")
    ap.add_argument("--perf", default="")
    args = ap.parse_args()
    bin_dir = os.path.abspath(args.bin)
    tmp = tempfile.mkdtemp(prefix="autoaccel-scale-")
    pb2, pb2_grpc = grpc_bench.load_stubs(os.path.join(tmp, "stubs"))
    server, address = grpc_bench.start_server(bin_dir, tmp, [])
    stub = pb2_grpc.TuningServiceStub(grpc.insecure_channel(address))
    fleet = None
    try:
        fleet = grpc_bench.Daemon("fake_fleet", [
            grpc_bench.binary(bin_dir, "fake_fleet"), "--coordinator", address, "--workers",
            str(args.workers), "--devices", str(args.devices), "--trial-seconds",
            str(args.trial_seconds), "--seconds", str(args.seconds), "--warmup",
            str(args.warmup)], os.path.join(tmp, "fleet.log"))
        fleet.wait_for_line(r"registered", timeout=300)
        t_registered = time.time()
        jobs = []
        for i in range(args.jobs):
            job = stub.SubmitJob(pb2.SubmitJobRequest(
                request=job_request(pb2, args.seconds + 600, args.checkpoint_percents)),
                timeout=120)
            jobs.append(job.job_id)
        print(f"scale: {args.workers} workers x {args.devices} devices, {args.jobs} jobs of "
              f"{job.trials_total} candidates each, trials of {args.trial_seconds} s; "
              f"measuring {args.seconds - args.warmup:.0f} s after {args.warmup:.0f} s")

        # Another client's reads meanwhile, each in its own thread so that a
        # slow one does not starve the other of samples; a call still
        # unanswered when the window ends is reported with its age, so that a
        # starved reader is not hidden by its few samples.
        get_latencies, watch_latencies = [], []
        asked_at = {}
        stop = threading.Event()

        def poll_get():
            while not stop.is_set():
                asked_at["get"] = time.perf_counter()
                stub.GetJob(pb2.GetJobRequest(job_id=jobs[0]), timeout=300)
                get_latencies.append(time.perf_counter() - asked_at.pop("get"))
                time.sleep(0.05)

        def poll_watch():
            while not stop.is_set():
                asked_at["watch"] = time.perf_counter()
                stream = stub.WatchJob(pb2.WatchJobRequest(job_id=jobs[-1]), timeout=300)
                next(iter(stream))
                watch_latencies.append(time.perf_counter() - asked_at.pop("watch"))
                stream.cancel()
                time.sleep(0.5)

        def latencies(samples, kind, at):
            text = load.percentiles(samples)
            if kind in asked_at:
                text += f"; 1 call unanswered after {at - asked_at[kind]:.1f} s"
            return text

        time.sleep(max(0, t_registered + args.warmup - time.time()))
        cpu0, wall0 = grpc_bench.cpu_seconds(server.pid), time.time()
        fleet_cpu0 = grpc_bench.cpu_seconds(fleet.pid)
        readers = [threading.Thread(target=f, daemon=True) for f in (poll_get, poll_watch)]
        for thread in readers:
            thread.start()
        recorder = None
        if args.perf:
            recorder = subprocess.Popen(["perf", "record", "-F", "997", "--call-graph",
                                         "dwarf,8192", "-p", str(server.pid), "-o", args.perf,
                                         "--", "sleep", "20"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        # The window ends just before the fleet stops.
        time.sleep(max(0, t_registered + args.seconds - 1 - time.time()))
        cpu = grpc_bench.cpu_seconds(server.pid) - cpu0
        fleet_cpu = grpc_bench.cpu_seconds(fleet.pid) - fleet_cpu0
        wall_end, ended = time.time(), time.perf_counter()
        wall = wall_end - wall0
        get_text = latencies(get_latencies, "get", ended)
        watch_text = latencies(watch_latencies, "watch", ended)
        stop.set()
        fleet.proc.wait(timeout=120)
        for thread in readers:
            thread.join(timeout=120)
        if recorder:
            recorder.wait()
        report = None
        with open(fleet.log_path) as f:
            for line in f:
                if line.startswith("{"):
                    report = json.loads(line)
        if report is None:
            raise SystemExit("fake_fleet printed no report:\n" + open(fleet.log_path).read())
        finished = trials_finished(os.path.join(tmp, "server.db"), wall0, wall_end)
        recorded = ", ".join(f"{n} {status}" for status, n in sorted(finished.items()))
        beats = re.search(r"(\d+) heartbeats failed of (\d+)", open(fleet.log_path).read())
        with open(os.path.join(tmp, "server.log")) as f:
            lost = sum(" lost: no heartbeat" in line for line in f)
        ideal = args.workers * args.devices / args.trial_seconds
        rows = [
            ("simulated devices", f"{args.workers} workers x {args.devices} = "
             f"{args.workers * args.devices}; trials of {args.trial_seconds} s +-10% "
             f"(ideal {ideal:.0f} results/s)"),
            ("jobs", f"{args.jobs} of {job.trials_total} candidates; window {wall:.1f} s "
             f"after {args.warmup:.0f} s"),
            ("dispatch gap (answer -> the device's next RunTrial)",
             f"n={report['gaps']} p50 {report['gap_p50_ms']:.1f} ms, p99 "
             f"{report['gap_p99_ms']:.1f} ms, max {report['gap_max_ms']:.1f} ms"),
            ("ranks answered by the fleet", f"{report['answered'] / report['window_s']:.0f}/s "
             f"({report['answered']} in {report['window_s']:.0f} s)"),
            ("trials the store recorded finished",
             f"{finished.get('SUCCEEDED', 0) / wall:.0f} SUCCEEDED/s ({recorded or 'none'} in "
             f"{wall:.0f} s)"),
            ("heartbeats", (f"{beats.group(1)} of the fleet's {beats.group(2)} failed; " if beats
                            else "") + f"{lost} times a worker was declared lost"),
            ("coordinator CPU", f"{cpu:.1f} s over {wall:.1f} s = {100 * cpu / wall:.0f}% of one "
             f"core ({os.cpu_count()} cores here)"),
            ("fake_fleet CPU (same cores)", f"{fleet_cpu:.1f} s = {100 * fleet_cpu / wall:.0f}%"),
            ("coordinator memory", f"RSS {grpc_bench.mib(server.rss())}, VmHWM "
             f"{grpc_bench.mib(server.peak_rss())}"),
            ("another client's GetJob (every 50 ms)", get_text),
            ("another client's WatchJob, first event (every 0.5 s)",
             watch_text),
        ]
        width = max(len(name) for name, _ in rows)
        for name, value in rows:
            print(f"{name:<{width}}  {value}")
    finally:
        if fleet:
            fleet.stop()
        server.stop()
    print(f"folder {tmp}")


if __name__ == "__main__":
    main()
