#!/usr/bin/env python3
"""Memory bound: what big messages make the coordinator hold, with and without credentials.

One command (the first run creates build/bench-venv from bench/requirements.txt):
  python3 bench/memory_bound.py [--bin build/bin] [--mib 500] [--count 3]

On 127.0.0.1, in a temporary folder, an autoaccel-server with a --tokens file
(user "alice") and a --join-token-file. Each case sends --count messages of
--mib MiB at once, waits for every answer, then samples the coordinator's RSS
for 5 s:

  unauthenticated SubmitJob  a TorchScript job of --mib MiB with a wrong token
  unauthenticated Register   a registration whose `insecure` text is --mib MiB,
                             with a wrong join token
  queued TorchScript jobs    alice's jobs of a --mib MiB file (4 GiB per-user
                             cap: at most 8 of 500 MiB), for cuda, which no
                             worker has: they wait, holding their files

It prints, per case: the answers by code, the coordinator's RSS before, its
peak during the case (VmHWM is a process-lifetime peak, so the server is
started afresh for each case) and its RSS 5 s after the last answer.
"""
import argparse
import collections
import concurrent.futures
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_bench  # noqa: E402

grpc_bench.ensure_venv()

import grpc  # noqa: E402

ALICE = "alice-token-0123456789abcdef0123"
JOIN = "join-token-0123456789abcdef01234567"


def torchscript_job(pb2, mib):
    model = pb2.ModelSpec(family="torchscript", script=b"\x00" * (mib << 20),
                          input_spec="input_ids:int64[B,T]<64; labels=input_ids")
    return pb2.TuneRequest(model=model, seq_len=16, global_batch_size=4, time_limit_seconds=600,
                           device_type="cuda", force=True)


def case(args, tmp, name, send):
    """Runs `send(stub_module, address)` --count times at once on a fresh server."""
    folder = os.path.join(tmp, name.replace(" ", "-"))
    os.makedirs(folder)
    with open(os.path.join(folder, "tokens"), "w") as f:
        f.write(f"{ALICE} alice\n")
    with open(os.path.join(folder, "join"), "w") as f:
        f.write(JOIN + "\n")
    os.chmod(os.path.join(folder, "tokens"), 0o600)
    os.chmod(os.path.join(folder, "join"), 0o600)
    server, address = grpc_bench.start_server(
        args.bin, folder, ["--tokens", os.path.join(folder, "tokens"), "--join-token-file",
                           os.path.join(folder, "join")])
    time.sleep(0.5)
    before = server.rss()
    codes = collections.Counter()
    options = [("grpc.max_send_message_length", -1)]
    with concurrent.futures.ThreadPoolExecutor(args.count) as pool:
        def one(_):
            with grpc.insecure_channel(address, options=options) as channel:
                try:
                    send(channel)
                    return "OK"
                except grpc.RpcError as e:
                    return e.code().name
        for code in pool.map(one, range(args.count)):
            codes[code] += 1
    peak = server.peak_rss()
    time.sleep(5)
    after = server.rss()
    alive = server.alive()
    server.stop()
    print(f"{name:28s} {dict(codes)!s:34s} RSS before {grpc_bench.mib(before):>9s}, "
          f"peak {grpc_bench.mib(peak):>9s}, 5 s after {grpc_bench.mib(after):>9s}"
          f"{'' if alive else '  (the server DIED)'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(grpc_bench.REPO, "build", "bin"))
    ap.add_argument("--mib", type=int, default=500)
    ap.add_argument("--count", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="autoaccel-memory-") as tmp:
        pb2, pb2_grpc = grpc_bench.load_stubs(os.path.join(tmp, "stubs"))
        print(f"{args.count} messages of {args.mib} MiB at once per case")

        def submit(token):
            def send(channel):
                pb2_grpc.TuningServiceStub(channel).SubmitJob(
                    pb2.SubmitJobRequest(request=torchscript_job(pb2, args.mib)),
                    metadata=[("authorization", f"Bearer {token}")], timeout=300)
            return send

        def register(channel):
            request = pb2.RegisterRequest(worker_id="w", address="127.0.0.1:1",
                                          insecure="x" * (args.mib << 20))
            pb2_grpc.WorkerRegistryStub(channel).Register(
                request, metadata=[("authorization", "Bearer not-the-join-token-0123456789")],
                timeout=300)

        case(args, tmp, "unauthenticated SubmitJob", submit("not-a-user-token-0123456789abcdef"))
        case(args, tmp, "unauthenticated Register", register)
        case(args, tmp, "queued TorchScript jobs", submit(ALICE))


if __name__ == "__main__":
    main()
