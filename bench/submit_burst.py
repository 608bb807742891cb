#!/usr/bin/env python3
"""SubmitJob under a burst: N submissions at once, from one asyncio thread.

  python3 bench/submit_burst.py [--bin build/bin] [--submissions 200] [--submitters N]
                                [--perf FILE]

On 127.0.0.1, in a temporary folder: an autoaccel-server (no tokens) and 3
autoaccel-worker processes (cpu:1 each); one warm-up submission, then
--submissions SubmitJob calls started together on one grpc.aio channel
(or --submitters at a time, each sending its share in turn: 50 submitters of 4
jobs each is bench/load.py's burst) (one
client thread: the client's own threads cannot inflate the figures, unlike
bench/load.py's 250), then 20 submissions one at a time. Before the burst, as many GetJob calls
for an unknown job at once: the floor the client and transport set. Every job is the tiny
GPT-2 of bench/load.py with force (every job tunes). Prints the burst's
duration, SubmitJob latency percentiles in the burst and alone, and the
coordinator's CPU time during the burst. --perf FILE
records the coordinator with `perf record --call-graph dwarf` during the burst
(perf must be installed). Not a timed test: docs/BENCHMARKS.md has figures."""
import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_bench  # noqa: E402

grpc_bench.ensure_venv()
import grpc  # noqa: E402
import load  # noqa: E402


async def burst(address, pb2, pb2_grpc, n, submitters, request, perf, server_pid):
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb2_grpc.TuningServiceStub(channel)
        await stub.SubmitJob(pb2.SubmitJobRequest(request=request), timeout=30)  # warm-up
        latencies = []

        async def submit():
            t0 = time.perf_counter()
            await stub.SubmitJob(pb2.SubmitJobRequest(request=request), timeout=60)
            latencies.append(time.perf_counter() - t0)

        # The floor: as many calls that do nearly nothing (GetJob of an
        # unknown job), at once on the same channel, measure what the client
        # and the transport cost on this machine.
        floor = []

        async def probe():
            t0 = time.perf_counter()
            try:
                await stub.GetJob(pb2.GetJobRequest(job_id="no-such-job"), timeout=60)
            except grpc.aio.AioRpcError as e:
                if e.code() != grpc.StatusCode.NOT_FOUND:
                    raise
            floor.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*[probe() for _ in range(n)])
        print(f"floor: {n} GetJob (unknown job) at once in {time.perf_counter() - t0:.2f} s; "
              f"{load.percentiles(floor)}")

        recorder = None
        if perf:
            recorder = subprocess.Popen(["perf", "record", "-F", "999", "--call-graph",
                                         "dwarf,16384", "-p", str(server_pid), "-o", perf,
                                         "--", "sleep", "4"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        t0 = time.perf_counter()
        cpu0 = grpc_bench.cpu_seconds(server_pid)
        async def submitter(count):
            for _ in range(count):
                await submit()

        await asyncio.gather(*[submitter(n // submitters + (i < n % submitters))
                               for i in range(submitters)])
        took = time.perf_counter() - t0
        cpu = grpc_bench.cpu_seconds(server_pid) - cpu0
        print(f"{n} submissions, {submitters} at a time, in {took:.2f} s; "
              f"SubmitJob {load.percentiles(latencies)}")
        print(f"coordinator CPU during the burst: {cpu:.2f} s over {took:.2f} s "
              f"({100 * cpu / took:.0f}% of one core; this machine has {os.cpu_count()})")
        latencies.clear()
        for _ in range(20):
            await submit()
        print(f"one at a time: SubmitJob {load.percentiles(latencies)}")
        if recorder:
            recorder.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(grpc_bench.REPO, "build", "bin"))
    ap.add_argument("--submissions", type=int, default=200)
    ap.add_argument("--submitters", type=int, default=0,
                    help="submissions in flight at once, each submitter sending its share one "
                         "after another (default: all of them at once)")
    ap.add_argument("--perf", default="", help="perf.data file to record the burst into")
    args = ap.parse_args()
    bin_dir = os.path.abspath(args.bin)
    tmp = tempfile.mkdtemp(prefix="autoaccel-burst-")
    pb2, pb2_grpc = grpc_bench.load_stubs(os.path.join(tmp, "stubs"))
    server, address = grpc_bench.start_server(bin_dir, tmp, [])
    workers = [grpc_bench.Daemon(f"w{i}", [
        grpc_bench.binary(bin_dir, "autoaccel-worker"), "--coordinator", address, "--listen",
        "127.0.0.1:0", "--devices", "cpu:1", "--threads-per-device", "1", "--work-dir",
        os.path.join(tmp, f"work{i}"), "--peak-tflops", "fp32=0.1,bf16=0.4,fp16=0.01",
        "--log-level", "warn"], os.path.join(tmp, f"worker{i}.log")) for i in range(3)]
    try:
        time.sleep(3)  # the workers register
        options = argparse.Namespace(time_limit=20, max_trials=1)
        asyncio.run(burst(address, pb2, pb2_grpc, args.submissions,
                          args.submitters or args.submissions,
                          load.tune_request(pb2, options), args.perf, server.pid))
    finally:
        for w in workers:
            w.stop()
        server.stop()
    print(f"folder {tmp}")


if __name__ == "__main__":
    main()
