"""What autoaccel-worker does for a launcher trial (docs/LAUNCHERS.md), in a
few lines of Python, so the examples and deploy/examples/launchers.json are
tested without a server or a worker: export the strategy with the real CLI
into each rank's trial directory, write strategy.json, expand the launcher's
argv placeholders, start every rank with the torchrun and AUTOACCEL_*
variables, wait for them, and read back their metrics files.

The ranks import the package from this tree (PYTHONPATH=python), so the
tests check the code beside them, not an installed copy."""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
from autoaccel.strategy import FIELDS  # noqa: E402  (standard library only)

FIELD_KINDS = {f.name: f.kind for f in FIELDS}
LAUNCHERS_FILE = os.path.join(ROOT, "deploy", "examples", "launchers.json")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
STEP_KEYS = {"step": int, "step_time_s": (int, float), "tokens": int, "samples": int,
             "loss": (int, float), "peak_memory_bytes": int}


def autoaccel_cli():
    return os.environ.get("AUTOACCEL_CLI", "")


def parse_metrics(path):
    """The events of a metrics file, checked against the protocol the worker
    enforces: one JSON object per line with a string "event"; a step has an
    int step >= 1 and step_time_s > 0, numbers where numbers go; an oom has a
    string message. Raises AssertionError naming the line otherwise."""
    events = []
    if not os.path.exists(path):
        return events
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text == "" or text.endswith("\n"), "last line without its newline: %r" % text[-80:]
    for n, line in enumerate(text.splitlines(), 1):
        doc = json.loads(line)
        assert isinstance(doc, dict) and isinstance(doc.get("event"), str), (n, line)
        if doc["event"] == "step":
            assert isinstance(doc.get("step"), int) and doc["step"] >= 1, (n, line)
            assert isinstance(doc.get("step_time_s"), (int, float)) and doc["step_time_s"] > 0, \
                (n, line)
            for key, kind in STEP_KEYS.items():
                if key in doc:
                    assert isinstance(doc[key], kind) and not isinstance(doc[key], bool), \
                        (n, key, line)
        elif doc["event"] == "oom":
            assert isinstance(doc.get("message"), str), (n, line)
        elif doc["event"] == "model":
            assert isinstance(doc.get("parameters"), int), (n, line)
        elif doc["event"] == "ready":
            assert isinstance(doc.get("seconds"), (int, float)), (n, line)
        events.append(doc)
    return events


def export(strategy_text, fmt, world_size, global_batch, seq_len, out=None):
    """`autoaccel export --json` of the strategy: (document, strategy JSON
    object built from the fidelity rows, one per strategy field)."""
    cmd = [autoaccel_cli(), "export", "--strategy", strategy_text, "--world-size",
           str(world_size), "--global-batch-size", str(global_batch), "--seq-len", str(seq_len),
           "--format", fmt or "torchrun", "--json"]
    if out and fmt:
        cmd += ["--out", out]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise AssertionError("%s: exit %d\n%s" % (" ".join(cmd), run.returncode, run.stderr))
    doc = json.loads(run.stdout)
    strategy = {}
    for row in doc["fidelity"]:
        value = row["value"]
        kind = FIELD_KINDS[row["dimension"]]
        if kind == "flag":
            value = value not in ("0", "false")
        elif kind == "count":
            value = int(value)
        strategy[row["dimension"]] = value
    return doc, strategy


def _absolute_file_references(trial_dir, names):
    # The worker exports with file_dir set, so the files name each other by
    # absolute path (--fsdp_config=/.../fsdp_config.json); `autoaccel export
    # --out` writes bare names, which this rewrites the same way.
    for name in names:
        path = os.path.join(trial_dir, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for other in names:
            text = re.sub(r"(?<=[=\s\"])%s(?=[\s\"]|$)" % re.escape(other),
                          os.path.join(trial_dir, other), text)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def _free_port():
    # The torchrun variables need a number before the ranks start, so (like
    # the worker) pick one the kernel offers and release it for rank 0.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _expand(argv, values, files):
    out = []
    for token in argv:
        star = re.fullmatch(r"\{\*([A-Za-z_][A-Za-z0-9_]*)\}", token)
        if star:
            with open(files[star.group(1)], encoding="utf-8") as f:
                out.extend(line for line in f.read().splitlines() if line.strip())
            continue

        def one(m):
            key = m.group(1)
            if key in values:
                return str(values[key])
            if key in files:
                return files[key]
            raise AssertionError("launcher placeholder {%s} has no value" % key)

        out.append(PLACEHOLDER.sub(one, token))
    return out


def run_launcher(name, strategy_text, world_size, global_batch, seq_len, warmup=1, measured=2,
                 timeout=300):
    """Runs launcher `name` of deploy/examples/launchers.json (or `name`
    itself when it is a launcher object) as the worker would, for one trial.
    Returns one dict per rank: returncode, events (the checked metrics),
    stderr, argv, trial_dir."""
    launcher = name
    if not isinstance(name, dict):
        with open(LAUNCHERS_FILE, encoding="utf-8") as f:
            launcher = json.load(f)["launchers"][name]
    fmt = launcher.get("format", "")
    work = tempfile.mkdtemp(prefix="aa-worker-sim-")
    port = _free_port()
    procs = []
    for rank in range(world_size):
        trial_dir = os.path.join(work, "t0001-a1-r%d" % rank)
        os.makedirs(trial_dir)
        doc, strategy = export(strategy_text, fmt, world_size, global_batch, seq_len,
                               out=trial_dir)
        written = sorted(doc["files"]) if fmt else []
        _absolute_file_references(trial_dir, written)
        files = {n: os.path.join(trial_dir, n) for n in written}
        strategy_file = os.path.join(trial_dir, "strategy.json")
        metrics_file = os.path.join(trial_dir, "metrics.jsonl")
        with open(strategy_file, "w", encoding="utf-8") as f:
            json.dump({"trial_id": "sim-t0001", "attempt": 1, "rank": rank, "local_rank": rank,
                       "world_size": world_size, "seq_len": seq_len,
                       "global_batch_size": global_batch, "warmup_steps": warmup,
                       "measured_steps": measured, "device_type": "cpu", "strategy": strategy,
                       "strategy_text": strategy_text, "format": fmt, "files": files}, f)
        values = dict(strategy)
        values.update(strategy_file=strategy_file, trial_dir=trial_dir, metrics_file=metrics_file,
                      python=sys.executable, rank=rank, local_rank=rank, world_size=world_size,
                      global_batch_size=global_batch, seq_len=seq_len, warmup_steps=warmup,
                      measured_steps=measured)
        values = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in values.items()}
        stems = {os.path.splitext(n)[0]: p for n, p in files.items()}
        argv = _expand(launcher["argv"], values, stems)
        env = dict(os.environ)
        env.update(launcher.get("env", {}))
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                   LOCAL_WORLD_SIZE=str(world_size), GROUP_RANK="0", ROLE_RANK=str(rank),
                   ROLE_WORLD_SIZE=str(world_size), AUTOACCEL_STRATEGY_FILE=strategy_file,
                   AUTOACCEL_TRIAL_DIR=trial_dir, AUTOACCEL_METRICS_FILE=metrics_file,
                   AUTOACCEL_WARMUP_STEPS=str(warmup), AUTOACCEL_MEASURED_STEPS=str(measured),
                   AUTOACCEL_TRIAL_ID="sim-t0001", AUTOACCEL_DEVICE_TYPE="cpu",
                   OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="",
                   PYTHONPATH=os.pathsep.join(
                       p for p in [os.path.join(ROOT, "python"), env.get("PYTHONPATH")] if p))
        # The worker gives one rank a local rendezvous too, as torchrun does.
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        workdir = os.path.normpath(os.path.join(os.path.dirname(LAUNCHERS_FILE),
                                                launcher.get("workdir", trial_dir)))
        stdout = open(os.path.join(trial_dir, "stdout.log"), "wb")
        stderr = open(os.path.join(trial_dir, "stderr.log"), "wb")
        procs.append((subprocess.Popen(argv, cwd=workdir, env=env, stdout=stdout, stderr=stderr,
                                       start_new_session=True), trial_dir, argv, stdout, stderr))
    results = []
    for proc, trial_dir, argv, stdout, stderr in procs:
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in procs:
                p[0].kill()
            raise
        stdout.close()
        stderr.close()
        with open(os.path.join(trial_dir, "stderr.log"), encoding="utf-8",
                  errors="replace") as f:
            err = f.read()
        results.append({"returncode": code, "stderr": err, "argv": argv, "trial_dir": trial_dir,
                        "events": parse_metrics(os.path.join(trial_dir, "metrics.jsonl"))})
    return results
