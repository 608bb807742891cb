#!/usr/bin/env python3
"""Load: concurrent submitters and watchers against one coordinator with a few workers.

One command (the first run creates build/bench-venv from bench/requirements.txt):
  python3 bench/load.py [--bin build/bin] [--submitters 50] [--jobs-per-submitter 4]
      [--users 10] [--workers 3] [--time-limit 420] [--max-trials 1]

On 127.0.0.1, in a temporary folder: an autoaccel-server with a --tokens file of
--users users (user0..userN-1) and an admin, and --workers autoaccel-worker
processes with one cpu device each (--bin must hold autoaccel-trial too: the
trials are real engine runs of a tiny GPT-2, tests/e2e_cluster.h kTinyGpt).
Submitter i submits as user (i mod --users), so each user holds
submitters/users x jobs-per-submitter unfinished jobs and as many streams
(20 each by default), under the per-user bounds of server/request_limits.h
(64 unfinished jobs, 256 watch streams): the run measures the coordinator,
not its refusals (--users 1 with more jobs measures the refusals).

  1. Idle baseline: GetJob latency for 5 s with no load (one job in the DB).
  2. Load: the --submitters threads start together, each submitting
     --jobs-per-submitter jobs back to back (force: every job tunes; space:
     micro-batch 2 and 4, fp32, no checkpointing, sdpa, adamw; at most
     --max-trials trials plus the job's confirmations; --time-limit s).
     Every accepted job gets a watcher thread at once: a WatchJob stream
     followed to its end (submitters x jobs-per-submitter watchers, 200 by
     default). Meanwhile a separate prober process (so the watchers' Python
     threads do not skew its clock) calls GetJob on a random submitted job
     every 20 ms with its owner's token and records the latency; the
     coordinator's RSS is sampled every 0.5 s.
  3. Bounds probe (--probe-bounds, default on): one more user submits 70 jobs
     (the 65th on must be RESOURCE_EXHAUSTED naming the bound), opens 260
     watch streams on one of them (the 257th on must be refused), then
     cancels them all.

It prints: submissions accepted / refused by code and message; watchers that
saw their job reach a terminal state, streams that broke (by code), streams
that ended without a terminal state, and any watcher whose last state differs
from GetJob's after the run; the most streams open at once; jobs by final
state and trials by status; SubmitJob latency in the burst, and the floor
(the same threads sending GetJob for an unknown job before the load); GetJob
latency p50/p90/p99/max idle and under load; the coordinator's RSS (start, peak sampled, VmHWM, end). Exit code 1
when anything was dropped (a submission without a clear answer, a stream
that broke or ended early, a job not terminal at the end).
"""
import argparse
import collections
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_bench  # noqa: E402

grpc_bench.ensure_venv()

import grpc  # noqa: E402

TINY_GPT = {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
            "n_positions": 32}
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
# Answers that are no clear refusal: the submission was dropped.
UNCLEAR = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "UNKNOWN", "INTERNAL", "CANCELLED", "ABORTED"}


def percentiles(values):
    if not values:
        return "no samples"
    v = sorted(values)
    at = lambda q: v[min(len(v) - 1, int(q * len(v)))] * 1000  # noqa: E731
    return (f"n={len(v)} p50 {at(0.5):.2f} ms, p90 {at(0.9):.2f} ms, p99 {at(0.99):.2f} ms, "
            f"max {v[-1] * 1000:.2f} ms")


def tune_request(pb2, args):
    r = pb2.TuneRequest(seq_len=16, global_batch_size=4, time_limit_seconds=args.time_limit,
                        max_trials=args.max_trials, device_type="cpu", force=True,
                        warmup_steps=1, measured_steps=2, min_measured_seconds=0.01)
    r.model.family = "gpt2"
    r.model.config_json = json.dumps(TINY_GPT)
    r.micro_batch_sizes.extend([2, 4])
    r.precisions.append("fp32")
    r.checkpointings.append("none")
    r.attentions.append("sdpa")
    r.optimizers.append("adamw")
    return r


def bearer(token):
    return [("authorization", f"Bearer {token}")]


# ---- the prober: a process of its own ---------------------------------------------------

def prober(address, stubs, tokens_path, seconds, out_path):
    """GetJob every 20 ms on a random job (its owner's token) for `seconds` or until
    out_path + ".stop" exists; latencies to out_path."""
    sys.path.insert(0, stubs)
    import autoaccel_pb2 as pb2
    import autoaccel_pb2_grpc as pb2_grpc

    tokens = json.load(open(tokens_path))
    stub = pb2_grpc.TuningServiceStub(grpc.insecure_channel(address))
    latencies, errors = [], collections.Counter()
    jobs, refreshed = [], 0.0
    end = time.time() + seconds
    while time.time() < end and not os.path.exists(out_path + ".stop"):
        if time.time() - refreshed > 1.0:
            listed = stub.ListJobs(pb2.ListJobsRequest(limit=500), metadata=bearer(tokens["admin"]),
                                   timeout=30)
            jobs = [(j.job_id, j.owner) for j in listed.jobs]
            refreshed = time.time()
        if jobs:
            job_id, owner = random.choice(jobs)
            t0 = time.perf_counter()
            try:
                stub.GetJob(pb2.GetJobRequest(job_id=job_id), metadata=bearer(tokens[owner]),
                            timeout=30)
                latencies.append((time.time(), time.perf_counter() - t0))
            except grpc.RpcError as e:
                errors[e.code().name] += 1
        time.sleep(0.02)
    json.dump({"latencies": latencies, "errors": errors}, open(out_path, "w"))


def run_prober(address, stubs, tokens_path, seconds, out_path):
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--prober", address, stubs,
                             tokens_path, str(seconds), out_path])


# ---- the load ----------------------------------------------------------------------------

class Watch:
    def __init__(self, job_id):
        self.job_id = job_id
        self.events = 0
        self.last_state = ""
        self.error = None  # (code, details) when the stream broke
        self.done = threading.Event()


def watch(stub, pb2, token, w, open_streams, lock):
    with lock:
        open_streams[0] += 1
        open_streams[1] = max(open_streams[1], open_streams[0])
    try:
        for event in stub.WatchJob(pb2.WatchJobRequest(job_id=w.job_id), metadata=bearer(token),
                                   timeout=3600):
            w.events += 1
            w.last_state = event.job.state
    except grpc.RpcError as e:
        w.error = (e.code().name, e.details())
    finally:
        with lock:
            open_streams[0] -= 1
        w.done.set()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--prober":
        prober(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), sys.argv[6])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(grpc_bench.REPO, "build", "bin"))
    ap.add_argument("--submitters", type=int, default=50)
    ap.add_argument("--jobs-per-submitter", type=int, default=4)
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=420.0)
    ap.add_argument("--max-trials", type=int, default=1)
    ap.add_argument("--no-probe-bounds", action="store_true")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    bin_dir = os.path.abspath(args.bin)
    grpc_bench.binary(bin_dir, "autoaccel-trial")
    tmp = tempfile.mkdtemp(prefix="autoaccel-load-")
    stubs = os.path.join(tmp, "stubs")
    pb2, pb2_grpc = grpc_bench.load_stubs(stubs)
    started = time.time()

    users = [f"user{i}" for i in range(args.users)] + ["bounds", "admin"]
    tokens = {u: f"load-token-{u}-{random.getrandbits(64):016x}" for u in users}
    with open(os.path.join(tmp, "tokens"), "w") as f:
        for u in users:
            f.write(f"{tokens[u]} {u}{' admin' if u == 'admin' else ''}\n")
    os.chmod(os.path.join(tmp, "tokens"), 0o600)
    tokens_path = os.path.join(tmp, "tokens.json")
    json.dump(tokens, open(tokens_path, "w"))
    join_token = os.path.join(tmp, "join-token")
    with open(os.open(join_token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(f"load-join-token-{random.getrandbits(64):016x}\n")
    server, address = grpc_bench.start_server(bin_dir, tmp,
                                              ["--tokens", os.path.join(tmp, "tokens"),
                                               "--join-token-file", join_token])
    workers = []
    for i in range(args.workers):
        workers.append(grpc_bench.Daemon(f"worker{i}", [
            grpc_bench.binary(bin_dir, "autoaccel-worker"), "--coordinator", address, "--listen",
            "127.0.0.1:0", "--devices", "cpu:1", "--threads-per-device", "1",
            "--work-dir", os.path.join(tmp, f"work{i}"), "--log-level", "warn",
            "--join-token-file", join_token],
            os.path.join(tmp, f"worker{i}.log")))
    channel = grpc.insecure_channel(address)
    stub = pb2_grpc.TuningServiceStub(channel)
    deadline = time.time() + 60
    while len(stub.ListWorkers(pb2.ListWorkersRequest(), metadata=bearer(tokens["admin"]),
                               timeout=10).workers) < args.workers:
        if time.time() > deadline:
            raise SystemExit("the workers did not register in 60 s; see " + tmp)
        time.sleep(0.2)
    rss_start = server.rss()
    print(f"load: binaries {bin_dir}, folder {tmp}, server {address}, {args.workers} workers "
          f"(cpu:1 each), {args.users} users, {args.submitters} submitters x "
          f"{args.jobs_per_submitter} jobs", flush=True)

    # 1. Idle baseline.
    first = stub.SubmitJob(pb2.SubmitJobRequest(request=tune_request(pb2, args)),
                           metadata=bearer(tokens["user0"]), timeout=30)
    idle_out = os.path.join(tmp, "idle.json")
    run_prober(address, stubs, tokens_path, 5, idle_out).wait()
    idle = json.load(open(idle_out))

    # The floor: the submitters' pattern with a call that does nearly
    # nothing (GetJob of an unknown job) measures what the client's threads
    # and the transport cost on this machine.
    floor = []
    floor_lock = threading.Lock()
    floor_barrier = threading.Barrier(args.submitters)

    def floor_submitter(i):
        floor_barrier.wait()
        for _ in range(args.jobs_per_submitter):
            t0 = time.perf_counter()
            try:
                stub.GetJob(pb2.GetJobRequest(job_id="no-such-job"),
                            metadata=bearer(tokens[f"user{i % args.users}"]), timeout=60)
            except grpc.RpcError:
                pass
            with floor_lock:
                floor.append(time.perf_counter() - t0)

    floor_threads = [threading.Thread(target=floor_submitter, args=(i,))
                     for i in range(args.submitters)]
    for t in floor_threads:
        t.start()
    for t in floor_threads:
        t.join()

    # 2. Load.
    lock = threading.Lock()
    open_streams = [0, 0]  # now, most at once
    submissions = collections.Counter()  # code -> n
    refusals = collections.Counter()  # (code, message) -> n
    watches = [Watch(first.job_id)]
    threading.Thread(target=watch, args=(stub, pb2, tokens["user0"], watches[0], open_streams,
                                         lock), daemon=True).start()
    owners = {first.job_id: "user0"}
    submit_latency = []
    barrier = threading.Barrier(args.submitters)
    rss_samples = []
    stop_sampling = threading.Event()

    def sample():
        while not stop_sampling.is_set():
            rss_samples.append(server.rss())
            time.sleep(0.5)

    def submitter(i):
        user = f"user{i % args.users}"
        barrier.wait()
        for _ in range(args.jobs_per_submitter):
            t0 = time.perf_counter()
            try:
                job = stub.SubmitJob(pb2.SubmitJobRequest(request=tune_request(pb2, args)),
                                     metadata=bearer(tokens[user]), timeout=60)
            except grpc.RpcError as e:
                with lock:
                    submissions[e.code().name] += 1
                    refusals[(e.code().name, e.details())] += 1
                continue
            w = Watch(job.job_id)
            with lock:
                submit_latency.append(time.perf_counter() - t0)
                submissions["OK"] += 1
                watches.append(w)
                owners[job.job_id] = user
            threading.Thread(target=watch, args=(stub, pb2, tokens[user], w, open_streams, lock),
                             daemon=True).start()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    load_out = os.path.join(tmp, "load.json")
    probe = run_prober(address, stubs, tokens_path, args.time_limit + 180, load_out)
    load_started = time.time()
    threads = [threading.Thread(target=submitter, args=(i,)) for i in range(args.submitters)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    submit_seconds = time.time() - load_started
    print(f"[{time.time() - started:.0f}s] {submissions['OK']} jobs submitted in "
          f"{submit_seconds:.1f} s; {open_streams[0]} streams open", flush=True)
    for w in list(watches):
        w.done.wait(args.time_limit + 120)
    load_seconds = time.time() - load_started
    open(load_out + ".stop", "w").close()
    probe.wait()
    stop_sampling.set()
    sampler.join()
    rss_after_load = server.rss()
    print(f"[{time.time() - started:.0f}s] every watcher done after {load_seconds:.1f} s",
          flush=True)

    # The jobs' records after the load.
    final = {}
    for job_id, user in owners.items():
        final[job_id] = stub.GetJob(pb2.GetJobRequest(job_id=job_id),
                                    metadata=bearer(tokens[user]), timeout=30)
    trials = collections.Counter()
    for job_id, user in owners.items():
        page = stub.ListTrials(pb2.ListTrialsRequest(job_id=job_id), metadata=bearer(tokens[user]),
                               timeout=30)
        for t in page.trials:
            trials[t.status] += 1
    loaded = json.load(open(load_out))

    # 3. The per-user bounds.
    bounds = collections.Counter()
    if not args.no_probe_bounds:
        probe_request = tune_request(pb2, args)
        probe_request.time_limit_seconds = 600
        probe_ids = []
        for _ in range(70):
            try:
                probe_ids.append(stub.SubmitJob(pb2.SubmitJobRequest(request=probe_request),
                                                metadata=bearer(tokens["bounds"]),
                                                timeout=30).job_id)
                bounds["SubmitJob OK"] += 1
            except grpc.RpcError as e:
                bounds[f"SubmitJob {e.code().name}: {e.details()}"] += 1
        streams = []
        for _ in range(260):
            call = stub.WatchJob(pb2.WatchJobRequest(job_id=probe_ids[0]),
                                 metadata=bearer(tokens["bounds"]), timeout=120)
            streams.append(call)
            try:
                next(call)
                bounds["WatchJob first event"] += 1
            except grpc.RpcError as e:
                bounds[f"WatchJob {e.code().name}: {e.details()}"] += 1
        for job_id in probe_ids:
            stub.CancelJob(pb2.CancelJobRequest(job_id=job_id), metadata=bearer(tokens["bounds"]),
                           timeout=30)
        for call in streams:
            call.cancel()

    # The report.
    watched = [w for w in watches if w.job_id in owners]
    broke = collections.Counter(w.error[0] for w in watched if w.error)
    terminal = sum(1 for w in watched if w.last_state in TERMINAL and not w.error)
    early = [w.job_id for w in watched if not w.error and w.last_state not in TERMINAL]
    mismatch = [w.job_id for w in watched if w.last_state != final[w.job_id].state]
    not_terminal = [j for j, job in final.items() if job.state not in TERMINAL]
    states = collections.Counter(job.state for job in final.values())
    print("\n== submissions")
    print(f"accepted {submissions['OK']}; refused: " +
          (", ".join(f"{c} {n}" for c, n in submissions.items() if c != "OK") or "none"))
    for (code, message), n in refusals.most_common():
        print(f"  {code} x{n}: {message}")
    print(f"SubmitJob latency under load: {percentiles(submit_latency)}")
    print(f"  the floor, GetJob of an unknown job sent the same way before the load: "
          f"{percentiles(floor)}")
    print("\n== watchers")
    print(f"streams: {len(watched)}; most open at once: {open_streams[1]}; saw a terminal state: "
          f"{terminal}; broke: {sum(broke.values())} {dict(broke)}; ended without a terminal "
          f"state: {len(early)}; last state differs from GetJob's: {len(mismatch)}")
    print(f"events per stream: median {statistics.median([w.events for w in watched]):.0f}, "
          f"max {max(w.events for w in watched)}")
    print("\n== jobs and trials")
    print(f"jobs by state: {dict(states)}; not terminal at the end: {len(not_terminal)}")
    print(f"trials by status: {dict(trials)}")
    ends = [job.finished_at - job.created_at for job in final.values()]
    print(f"job duration (created -> finished): median {statistics.median(ends):.1f} s, "
          f"max {max(ends):.1f} s (limit {args.time_limit:.0f} s)")
    print("\n== GetJob latency (a separate process, every 20 ms, the owner's token)")
    burst_end = load_started + submit_seconds + 1.0
    print(f"idle:       {percentiles([l for _, l in idle['latencies']])}; errors {idle['errors']}")
    print(f"under load: {percentiles([l for _, l in loaded['latencies']])}; errors "
          f"{loaded['errors']}")
    print(f"  of which during the submissions (first {submit_seconds + 1:.1f} s): "
          f"{percentiles([l for t, l in loaded['latencies'] if t < burst_end])}")
    print(f"  of which after, jobs running and watched: "
          f"{percentiles([l for t, l in loaded['latencies'] if t >= burst_end])}")
    print("\n== coordinator memory")
    print(f"RSS start {grpc_bench.mib(rss_start)}, sampled peak "
          f"{grpc_bench.mib(max(rss_samples or [0]))}, after the load "
          f"{grpc_bench.mib(rss_after_load)}, VmHWM {grpc_bench.mib(server.peak_rss())}")
    if bounds:
        print("\n== per-user bounds (one user, 70 jobs, 260 streams)")
        for what, n in sorted(bounds.items()):
            print(f"  {n:4d} x {what}")
    alive = all(d.alive() for d in [server] + workers)
    print(f"\ndaemons alive at the end: {alive}; elapsed {time.time() - started:.0f} s")
    for w in workers:
        w.stop()
    server.stop()
    dropped = (sum(broke.values()) + len(early) + len(not_terminal) + len(mismatch) +
               sum(n for c, n in submissions.items() if c in UNCLEAR))
    if not args.keep and not dropped and alive:
        subprocess.run(["rm", "-rf", tmp])
    return 0 if not dropped and alive else 1


if __name__ == "__main__":
    sys.exit(main())
