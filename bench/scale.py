#!/usr/bin/env python3
"""The coordinator at scale: simulated workers dispatching continuously.

One command (the first run creates build/bench-venv from bench/requirements.txt):
  python3 bench/scale.py [--bin build/bin] [--workers 1000] [--devices 8]
      [--trial-seconds 1.0] [--seconds 60] [--warmup 15] [--jobs 4] [--perf FILE]

On 127.0.0.1, in a temporary folder: an autoaccel-server (no tokens) and
build/bin/fake_fleet (bench/fake_fleet.cc): --workers simulated workers of
--devices cpu devices each, every one at its own loopback address
(127.1.X.Y), answering each rank after --trial-seconds (±10%). Then --jobs
jobs of the tiny GPT-2 with world size 1 and every dimension open (the
space's size is printed), exhaustive search, a time limit past the run, from
as many users. For --seconds the fleet is kept busy; after --warmup it
measures:

  dispatch gap     per device, from the fleet answering a rank to the device's
                   next RunTrial arriving (what the coordinator takes to record
                   a result and send the next candidate), p50 / p99 / max
  results/s        ranks answered per second in the window, and trials the
                   coordinator recorded done per second (GetJob's trials_done)
  coordinator      CPU seconds over the window (/proc/PID/stat), RSS, VmHWM
  other users      GetJob and WatchJob latency from a separate user meanwhile
                   (GetJob every 50 ms; WatchJob: time to the first event)

--perf FILE records the coordinator with `perf record --call-graph dwarf` for
10 s of the window. Not a timed test: docs/BENCHMARKS.md has figures.
"""
import argparse
import json
import os
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


def job_request(pb2, time_limit):
    """World size 1, every dimension open: the tiny model's whole space."""
    return pb2.TuneRequest(
        model=pb2.ModelSpec(family="gpt2", config_json=TINY_GPT), seq_len=32,
        global_batch_size=64, time_limit_seconds=time_limit, device_type="cpu", force=True,
        algorithm="exhaustive", warmup_steps=1, measured_steps=5,
        precisions=["fp32", "bf16", "fp16", "pure_bf16"],
        checkpointings=["none", "full", "selective"], checkpoint_percents=[25, 50, 75, 100],
        attentions=["math", "sdpa"], optimizers=["adamw", "fused_adamw"],
        offloads=["none"])


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
                request=job_request(pb2, args.seconds + 600)), timeout=120)
            jobs.append(job.job_id)
        print(f"scale: {args.workers} workers x {args.devices} devices, {args.jobs} jobs of "
              f"{job.trials_total} candidates each, trials of {args.trial_seconds} s; "
              f"measuring {args.seconds - args.warmup:.0f} s after {args.warmup:.0f} s")

        # Another user's reads meanwhile.
        get_latencies, watch_latencies = [], []
        stop = threading.Event()

        def reader():
            while not stop.is_set():
                t0 = time.perf_counter()
                stub.GetJob(pb2.GetJobRequest(job_id=jobs[0]), timeout=60)
                get_latencies.append(time.perf_counter() - t0)
                if len(get_latencies) % 20 == 0:
                    t0 = time.perf_counter()
                    stream = stub.WatchJob(pb2.WatchJobRequest(job_id=jobs[-1]), timeout=60)
                    next(iter(stream))
                    watch_latencies.append(time.perf_counter() - t0)
                    stream.cancel()
                time.sleep(0.05)

        time.sleep(max(0, t_registered + args.warmup - time.time()))
        cpu0, wall0 = cpu_seconds(server.pid), time.time()
        done0 = sum(stub.GetJob(pb2.GetJobRequest(job_id=j), timeout=120).trials_done
                    for j in jobs)
        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        recorder = None
        if args.perf:
            recorder = subprocess.Popen(["perf", "record", "-F", "499", "--call-graph",
                                         "dwarf,16384", "-p", str(server.pid), "-o", args.perf,
                                         "--", "sleep", "10"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        fleet.proc.wait(timeout=args.seconds + 120)
        cpu, wall = cpu_seconds(server.pid) - cpu0, time.time() - wall0
        stop.set()
        thread.join(timeout=60)
        if recorder:
            recorder.wait()
        report = None
        with open(fleet.log_path) as f:
            for line in f:
                if line.startswith("{"):
                    report = json.loads(line)
        if report is None:
            raise SystemExit("fake_fleet printed no report:\n" + open(fleet.log_path).read())
        done_at_end = sum(stub.GetJob(pb2.GetJobRequest(job_id=j), timeout=120).trials_done
                          for j in jobs)
        print(f"dispatch gap (answer -> the device's next RunTrial): n={report['gaps']} "
              f"p50 {report['gap_p50_ms']:.1f} ms, p99 {report['gap_p99_ms']:.1f} ms, "
              f"max {report['gap_max_ms']:.1f} ms")
        print(f"results: {report['answered'] / report['window_s']:.0f} ranks answered/s in the "
              f"window ({report['answered']} in {report['window_s']:.0f} s); trials recorded "
              f"done: {(done_at_end - done0) / wall:.0f}/s ({done_at_end - done0} in {wall:.0f} s)")
        print(f"coordinator: {cpu:.1f} CPU s over {wall:.1f} s ({100 * cpu / wall:.0f}% of one "
              f"core, {os.cpu_count()} cores here); RSS {grpc_bench.mib(server.rss())}, "
              f"VmHWM {grpc_bench.mib(server.peak_rss())}")
        print(f"another user's GetJob: {load.percentiles(get_latencies)}")
        print(f"another user's WatchJob (first event): {load.percentiles(watch_latencies)}")
    finally:
        if fleet:
            fleet.stop()
        server.stop()
    print(f"folder {tmp}")


if __name__ == "__main__":
    main()
