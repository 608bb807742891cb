#!/usr/bin/env python3
"""A world-size-4 gang whose ranks live on four hosts, each a network namespace.

The coordinator runs in a namespace of its own ("hub", holding a bridge); four
workers run in four more, each reaching the bridge over a veth pair with an
address of its own (10.231.0.11-14/24) and one cpu device, so every rank of a
4-rank trial runs on a different host. Workers 1 and 2 listen on their address;
workers 3 and 4 listen on 0.0.0.0 and say where they are with --advertise-host
(a wildcard listen would otherwise register the host name, which all the
namespaces share and which many containers map to 127.0.0.1). Nothing runs in the caller's namespace: the
addresses exist only inside these namespaces, so runs side by side do not meet.

`autoaccel tune` of a tiny GPT with --world-size 4 must succeed, and:
  - the coordinator lists each worker at its own non-loopback address, and
    sends each rank there; no worker warns that its address is loopback here;
  - every trial's ranks ran on all four workers, at the first attempt;
  - each trial met at the rank-0 worker's advertised address: the coordinator's
    log says so, and every rank's spec names that address as MASTER_ADDR;
  - gloo ran over the veth links. A rank's loopback cannot reach another
    namespace, so a gang whose process groups used 127.0.0.1 fails; and the
    bytes each worker's veth carried during the job are at least the
    gradients its rank all-reduced.

Exits 0 on success, 1 on a failed check (the folder with every log is kept
and named), 77 when this machine cannot make network namespaces (not root,
or no `ip netns`), which CTest reports as skipped.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
NAME_PREFIX = "autoaccel-gang"
SUBNET = "10.231.0"
HUB_ADDRESS = f"{SUBNET}.1"
WORKERS = 4
TINY_GPT = {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 4,
            "vocab_size": 64, "n_positions": 32}
# Rendezvous ports each worker offers (the coordinator hands one to each
# running gang whose rank 0 is there).
RENDEZVOUS_PORTS = "29500-29509"


class CheckFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise CheckFailed(message)


def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, **kwargs)


class Namespaces:
    """The hub namespace with bridge br0 at HUB_ADDRESS, and one namespace per
    worker whose eth0 (a veth to the bridge) has SUBNET.1<i>. Deleted on close,
    with every process started in them."""

    def __init__(self, prefix):
        self.hub = f"{prefix}-hub"
        self.workers = [f"{prefix}-w{i}" for i in range(1, WORKERS + 1)]
        self.made = []
        self.processes = []

    def address(self, i):
        return f"{SUBNET}.1{i + 1}"

    def _ip(self, *args):
        done = run(["ip", *args])
        if done.returncode != 0:
            raise OSError(f"ip {' '.join(args)}: {done.stderr.strip()}")

    def create(self):
        for name in [self.hub] + self.workers:
            self._ip("netns", "add", name)
            self.made.append(name)
            self._ip("-n", name, "link", "set", "lo", "up")
        self._ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        self._ip("-n", self.hub, "addr", "add", f"{HUB_ADDRESS}/24", "dev", "br0")
        self._ip("-n", self.hub, "link", "set", "br0", "up")
        for i, ns in enumerate(self.workers):
            veth = f"v{i + 1}"
            self._ip("-n", self.hub, "link", "add", veth, "type", "veth",
                     "peer", "name", "eth0", "netns", ns)
            self._ip("-n", self.hub, "link", "set", veth, "master", "br0")
            self._ip("-n", self.hub, "link", "set", veth, "up")
            self._ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            self._ip("-n", ns, "link", "set", "eth0", "up")

    def start(self, ns, argv, log_dir, name):
        out = open(os.path.join(log_dir, f"{name}.out"), "w")
        err = open(os.path.join(log_dir, f"{name}.err"), "w")
        # `ip netns exec` enters the namespace and execs argv: same pid.
        p = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=out, stderr=err,
                             cwd=log_dir, start_new_session=True)
        p.log_paths = (out.name, err.name)
        self.processes.append(p)
        return p

    def run(self, ns, argv, timeout):
        return run(["ip", "netns", "exec", ns, *argv], timeout=timeout)

    def counters(self, ns, device):
        """(rx_bytes, tx_bytes) of `device` in `ns`, from the namespace's /proc/net/dev."""
        text = self.run(ns, ["cat", "/proc/net/dev"], timeout=10).stdout
        for line in text.splitlines():
            name, _, fields = line.partition(":")
            if name.strip() == device:
                f = fields.split()
                return int(f[0]), int(f[8])
        raise CheckFailed(f"no {device} in {ns}'s /proc/net/dev:\n{text}")

    def close(self):
        for p in self.processes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        end = time.monotonic() + 5
        for p in self.processes:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        # Trial ranks run in process groups of their own: whatever the
        # workers left goes too. Deleting a namespace deletes the veth ends
        # in it (and so their peers).
        for name in reversed(self.made):
            kill_everything_in(name)
            run(["ip", "netns", "del", name])


def kill_everything_in(ns):
    """SIGKILLs every process in namespace `ns`, again until none is left (a
    dying worker may have started a rank meanwhile)."""
    for _ in range(50):
        pids = run(["ip", "netns", "pids", ns]).stdout.split()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def remove_stale_namespaces():
    """Namespaces (and the processes in them) of runs that were killed before
    they could clean up: their names carry the pid of a process now gone."""
    listed = [line.split()[0] for line in run(["ip", "netns", "list"]).stdout.splitlines()
              if line.split()]
    # The hubs first: their coordinators stop sending ranks to the workers.
    for name in sorted(listed, key=lambda n: not n.endswith("-hub")):
        m = re.fullmatch(rf"{NAME_PREFIX}-(\d+)-(hub|w\d+)", name)
        if not m or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        kill_everything_in(name)
        run(["ip", "netns", "del", name])


def wait_for_line(process, needle, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open(process.log_paths[0]) as f:
            for line in f:
                if needle in line:
                    return line.strip()
        if process.poll() is not None:
            break
        time.sleep(0.1)
    with open(process.log_paths[1]) as f:
        raise CheckFailed(f"no line with '{needle}' from {process.args}; stderr:\n{f.read()}")


def host_of(address):
    return address.rsplit(":", 1)[0]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True, help="autoaccel-server executable")
    ap.add_argument("--worker", required=True, help="autoaccel-worker executable")
    ap.add_argument("--cli", required=True, help="autoaccel executable")
    args = ap.parse_args()
    # The daemons run in the folder of their logs.
    for name in ("server", "worker", "cli"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    return args


def can_make_namespaces():
    """'' when this machine can make network namespaces, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add), and this runs as uid " \
               f"{os.geteuid()}"
    if shutil.which("ip") is None:
        return "no `ip` command (Debian package iproute2)"
    return ""


def run_checks(args, ns, log_dir):
    config = os.path.join(log_dir, "config.json")
    with open(config, "w") as f:
        json.dump(TINY_GPT, f)

    server = ns.start(ns.hub, [args.server, "--listen", f"{HUB_ADDRESS}:0", "--db",
                               os.path.join(log_dir, "autoaccel.db"), "--heartbeat-interval",
                               "0.5", "--worker-timeout", "3", "--insecure"], log_dir, "server")
    line = wait_for_line(server, "listening on", 20)
    coordinator = re.search(r"listening on (\S+)", line).group(1)
    check(host_of(coordinator) == HUB_ADDRESS, f"coordinator at {coordinator}: {line}")

    advertised = {}
    for i, worker_ns in enumerate(ns.workers):
        worker_id = f"host{i + 1}"
        # Two ways to say where a worker is: listen on its address, or listen
        # on every address and advertise one.
        listen = ["--listen", f"{ns.address(i)}:0"] if i < 2 else \
                 ["--listen", "0.0.0.0:0", "--advertise-host", ns.address(i)]
        work_dir = os.path.join(log_dir, worker_id)
        ns.start(worker_ns, [args.worker, "--coordinator", coordinator, *listen,
                             "--devices", "cpu:1", "--id", worker_id,
                             "--threads-per-device", "1", "--work-dir", work_dir,
                             "--rendezvous-ports", RENDEZVOUS_PORTS,
                             # Known peaks skip the GEMM probe (~1 s per start).
                             "--peak-tflops", "fp32=0.1,bf16=0.4,fp16=0.01", "--insecure"],
                 log_dir, worker_id)
        advertised[worker_id] = ns.address(i)

    def cli(*argv, timeout=30):
        return ns.run(ns.hub, [args.cli, "--server", coordinator, *argv], timeout=timeout)

    # The coordinator lists every worker at its own address.
    end = time.monotonic() + 20
    workers = []
    while time.monotonic() < end:
        done = cli("workers", "--json")
        if done.returncode == 0:
            workers = json.loads(done.stdout)["workers"]
            if sum(w["healthy"] for w in workers) == WORKERS:
                break
        time.sleep(0.2)
    check(len(workers) == WORKERS and all(w["healthy"] for w in workers),
          f"not {WORKERS} healthy workers: {json.dumps(workers)}")
    for w in workers:
        check(host_of(w["address"]) == advertised[w["worker_id"]],
              f"worker {w['worker_id']} registered at {w['address']}, "
              f"not {advertised[w['worker_id']]}")

    # Each reaches its advertised address over its veth, not loopback: no
    # worker warns that other hosts could not join its gangs.
    for worker_id in advertised:
        for path in (os.path.join(log_dir, f"{worker_id}.out"),
                     os.path.join(log_dir, f"{worker_id}.err")):
            with open(path) as f:
                text = f.read()
            check("over loopback" not in text, f"{worker_id} warns: {text}")

    before = {n: ns.counters(n, "eth0") for n in ns.workers}
    started = time.monotonic()
    # One search trial of dp4 (and its confirmation); 4 ranks, one per host.
    done = cli("tune", "--model", "gpt2", "--model-config", config, "--seq-len", "16",
               "--global-batch-size", "8", "--world-size", "4", "--tp-sizes", "1",
               "--pp-sizes", "1", "--shardings", "none", "--sequence-parallel", "off",
               "--precisions", "fp32", "--attentions", "sdpa", "--checkpointings", "none",
               "--optimizers", "fused_adamw", "--micro-batch-sizes", "2", "--max-trials", "1",
               "--warmup-steps", "1", "--measured-steps", "2",
               "--time-limit", "2m", "--json", timeout=150)
    tune_seconds = time.monotonic() - started
    after = {n: ns.counters(n, "eth0") for n in ns.workers}
    check(done.returncode == 0, f"tune exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    job = json.loads(done.stdout)
    check(job["state"] == "SUCCEEDED", f"job {job['state']}: {done.stdout}")
    check(len(job["trials"]) >= 1, f"no trials: {done.stdout}")

    server_log = open(server.log_paths[0]).read() + open(server.log_paths[1]).read()
    for t in job["trials"]:
        check(t["status"] == "SUCCEEDED", f"trial not SUCCEEDED: {json.dumps(t)}")
        # Nothing here holds a rendezvous port or blocks a connection: a
        # retried attempt is a gang that could not meet.
        check(not t["failed_attempts"], f"trial {t['index']} was retried: {json.dumps(t)}")
        check(sorted(t["worker_ids"]) == sorted(advertised),
              f"trial {t['index']} ran on {t['worker_ids']}, not on every host")
        check(len(t["metrics"]["rank_peak_memory_bytes"]) == 4, json.dumps(t))
        check(t["metrics"]["comm_time_s"] > 0, f"no communication: {json.dumps(t)}")

        # Every rank met at rank 0's worker, at the address it advertised.
        stem = f"{t['trial_id']}-a{t['attempt']}-r"
        specs = {}  # rank -> (worker id, spec)
        for worker_id in advertised:
            for d in os.listdir(os.path.join(log_dir, worker_id)):
                if d.startswith(stem):
                    with open(os.path.join(log_dir, worker_id, d, "spec.json")) as f:
                        s = json.load(f)
                    specs[s["rank"]] = (worker_id, s)
        check(sorted(specs) == [0, 1, 2, 3], f"trial {t['index']}: the specs of ranks "
                                             f"{sorted(specs)} in the workers' folders")
        check(len({w for w, _ in specs.values()}) == 4,
              f"trial {t['index']}: two ranks on one host: {specs}")
        rank0_host = advertised[specs[0][0]]
        for rank, (worker_id, s) in specs.items():
            check(s["master_addr"] == rank0_host,
                  f"trial {t['index']}: rank {rank} on {worker_id} met at {s['master_addr']}, "
                  f"but rank 0 ran on {specs[0][0]} at {rank0_host}")
        pattern = rf"trial {t['index']}\b.* on .*\(rendezvous {re.escape(rank0_host)}:\d+\)"
        check(re.search(pattern, server_log),
              f"the coordinator's log names no rendezvous at {rank0_host} for trial {t['index']}")

    # Gloo's traffic crossed the veths: in every step (the warm-up one and
    # the measured ones) each rank all-reduced its gradients (every
    # parameter, fp32) with the other three, which takes sending and
    # receiving at least 3/4 of them each (a ring sends and receives 2 * 3/4).
    steps = sum(1 + t["metrics"]["measured_steps"] for t in job["trials"])
    floor = int(2 * 0.75 * parameters_of(TINY_GPT) * 4 * steps)
    moved = {}
    for n in ns.workers:
        moved[n] = (after[n][0] - before[n][0]) + (after[n][1] - before[n][1])
        check(moved[n] >= floor, f"{n}'s veth carried {moved[n]} bytes during the job, less "
                                 f"than the {floor} bytes of the gradients of {steps} steps")
    print(f"tune: {tune_seconds:.1f} s, {len(job['trials'])} trial(s) of 4 ranks on 4 hosts; "
          f"{steps} steps; bytes over each host's veth: {sorted(moved.values())} (the gradients "
          f"alone: >= {floor})")


def parameters_of(c):
    """Parameters of a GPT-2 of config `c` (tied embeddings)."""
    e, layers = c["n_embd"], c["n_layer"]
    # Two layer norms, attention's qkv and projection, the MLP's two.
    per_layer = 2 * 2 * e + (e * 3 * e + 3 * e) + (e * e + e) + (e * 4 * e + 4 * e) \
        + (4 * e * e + e)
    return c["vocab_size"] * e + c["n_positions"] * e + layers * per_layer + 2 * e


def main():
    args = parse_args()
    why_not = can_make_namespaces()
    if why_not:
        print(f"SKIPPED: {why_not}")
        return SKIP
    # A SIGTERM (CTest's timeout, Ctrl-C's cousin) still cleans up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    remove_stale_namespaces()
    ns = Namespaces(f"{NAME_PREFIX}-{os.getpid()}")
    try:
        ns.create()
    except OSError as e:
        ns.close()
        print(f"SKIPPED: this machine cannot make network namespaces joined by veth pairs and "
              f"a bridge: {e}")
        return SKIP
    log_dir = tempfile.mkdtemp(prefix="autoaccel-netns-")
    ok = False
    try:
        run_checks(args, ns, log_dir)
        ok = True
    except CheckFailed as e:
        print(f"FAILED: {e}")
    finally:
        ns.close()
        if ok:
            shutil.rmtree(log_dir, ignore_errors=True)
        else:
            print(f"logs kept in {log_dir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
