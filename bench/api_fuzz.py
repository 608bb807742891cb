#!/usr/bin/env python3
"""API fuzz of the real daemons from Python (hypothesis + grpcio; no mocks).
(One file of ~800 lines so that it runs as one command with no package to
install beside it.)

One command (the first run creates build/bench-venv from bench/requirements.txt):
  python3 bench/api_fuzz.py [--bin build/bin] [--submit 3000] [--register 1500]
      [--run-trial 1000] [--others 300] [--register-jobs-every 50] [--seed 1] [--keep]
--bin needs autoaccel-server and autoaccel-worker, and autoaccel-trial for the
RunTrial calls whose spec is valid (an ENGINE=ON build, or main's binaries).

What it does, against daemons of --bin started here on 127.0.0.1 with their own
temporary folder:
  1. SubmitJob x --submit on an autoaccel-server: a valid tiny GPT-2 request
     with 1-5 of its fields replaced by hypothesis (random or ill-formed
     configs, JSON nested up to 5,000 deep, sizes past every bound, strategy and
     candidate lists, NaN/inf/huge numbers, text). Every accepted job is
     cancelled at once (so the coordinator does not pile up work).
  2. Register x --register on the same server (random ids, addresses,
     devices, memory, peaks, ports, launchers, session tokens); every 50th
     registration (--register-jobs-every) is followed by a 5 s tiny job left
     to run, so the coordinator plans and dispatches onto the fuzzed workers.
  3. GetJob / CancelJob / ListTrials / ListJobs / WatchJob x --others with
     random ids, page tokens and sizes.
  4. Wire-level requests the Python message API cannot build: invalid UTF-8
     in every string field of SubmitJobRequest, RegisterRequest and
     RunTrialRequest (one request per field), varints past int32 in every
     int32 field, truncated and random bytes.
  5. RunTrial / CancelTrial x --run-trial on a real autoaccel-worker whose
     coordinator is this script (a Python WorkerRegistry that hands it a known
     session token): fuzzed trial ids, attempts, device indices, spec_json
     (a valid tiny spec 1 in 20: the worker runs it; else 1-4 keys mutated,
     or random JSON), timeouts,
     model files, launchers; a few without the token or with another one.
Then it stops the server with SIGTERM and opens its database with sqlite3.

It prints: requests per RPC; crashes (a daemon not alive after a request: the
request is printed and the run stops); every rejection's status code and
whether its message names a field of the request (the messages that name none
are listed, digits folded to N); the daemons' RSS at the start, after each
tenth of a phase and at the end; and the database checks (integrity_check,
foreign_key_check, trials without their job, jobs not terminal after the
stop, terminal jobs without finished_at, unfinished trials of finished jobs,
a best_trial_id that names no trial, request_json that is not JSON, and that
every accepted job has its row). Exit code 1 when a daemon died or a
database check failed.
"""
import argparse
import collections
import concurrent.futures
import json
import math
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
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TINY_GPT = {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
            "n_positions": 32}
SESSION_TOKEN = "fuzz-session-token-0123456789abcdef"
TERMINAL_JOB = {"SUCCEEDED", "FAILED", "CANCELLED"}
TERMINAL_TRIAL = {"SUCCEEDED", "OOM", "FAILED", "TIMEOUT", "PRUNED", "CANCELLED"}

INT32_EDGES = [0, 1, -1, 2, 3, 7, 64, 255, 256, 1023, 1024, 65535, 65536, 65537, 1 << 24,
               (1 << 24) + 1, 2**31 - 1, -2**31, 1000000, 1000001]
DOUBLE_EDGES = [0.0, -0.0, 1e-300, 0.001, 1.0, 5.0, 600.0, 600.5, 86400.0, 86401.0, 2592000.0,
                2592001.0, 1e308, -1.0, float("nan"), float("inf"), float("-inf")]

i32 = st.one_of(st.sampled_from(INT32_EDGES), st.integers(-2**31, 2**31 - 1))
i64 = st.one_of(st.sampled_from([0, -1, 1 << 40, 64 << 40, (64 << 40) + 1, 2**63 - 1, -2**63]),
                st.integers(-2**63, 2**63 - 1))
f64 = st.one_of(st.sampled_from(DOUBLE_EDGES), st.floats(allow_nan=True, allow_infinity=True))
short_text = st.text(max_size=40)
# Text past the 16 KiB bound of a string field, cheap to make.
big_text = st.builds(lambda c, n: c * n, st.sampled_from(["a", "é", "\u4e00", ",", "="]),
                     st.sampled_from([16 * 1024, 16 * 1024 + 1, 70000, 300000]))
text = st.one_of(short_text, big_text, st.sampled_from(["", " ", "\x00", "-", "../../etc/passwd"]))


def json_values(max_leaves=30):
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), f64.filter(math.isfinite),
                       short_text)
    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(short_text, inner, max_size=5)),
        max_leaves=max_leaves)


def nested_json(depth, kind):
    return ("[" * depth + "]" * depth) if kind == 0 else ('{"a":' * depth + "1" + "}" * depth)


GPT_KEYS = list(TINY_GPT) + ["n_inner", "n_ctx", "num_hidden_layers", "hidden_size",
                             "num_attention_heads", "intermediate_size", "head_dim",
                             "num_local_experts", "max_position_embeddings",
                             "num_key_value_heads", "tie_word_embeddings", "layer_types"]


@st.composite
def model_configs(draw):
    kind = draw(st.integers(0, 6))
    if kind == 0:  # the tiny config with keys mutated
        cfg = dict(TINY_GPT)
        for key in draw(st.lists(st.sampled_from(GPT_KEYS), max_size=4)):
            cfg[key] = draw(st.one_of(i64, f64.filter(math.isfinite), json_values(5),
                                      st.sampled_from([10**30, -(10**30), 1e308, 2**64]),
                                      short_text))
        return json.dumps(cfg, allow_nan=True)
    if kind == 1:
        return json.dumps(draw(json_values()), allow_nan=True)
    if kind == 2:
        return nested_json(draw(st.sampled_from([63, 64, 65, 100, 300, 5000])),
                           draw(st.integers(0, 1)))
    if kind == 3:  # over 256 KiB
        return json.dumps({"model_type": "gpt2", "pad": "x" * draw(st.sampled_from(
            [256 * 1024, 300000]))})
    if kind == 4:  # numbers JSON parsers disagree on
        v = draw(st.sampled_from(["1e999", "-1e999", "NaN", "Infinity", "123456789012345678901234",
                                  "1.5", "-0", "0x10", "1e-400"]))
        k = draw(st.sampled_from(GPT_KEYS))
        return json.dumps(TINY_GPT)[:-1] + f', "{k}": {v}}}'
    if kind == 5:
        return draw(text)
    return json.dumps(TINY_GPT)


override = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(GPT_KEYS + ["", "a.b.c", "x" * 300]),
              st.one_of(st.integers(-2**70, 2**70).map(str), short_text,
                        json_values(5).map(json.dumps))),
    text, st.builds(lambda d: "n_layer=" + nested_json(d, 0), st.sampled_from([10, 64, 65, 400])))


def names(values):
    return st.one_of(st.sampled_from(values), short_text)


def name_lists(values):
    return st.one_of(st.lists(names(values), max_size=6),
                     st.lists(st.sampled_from(values), min_size=257, max_size=300))


def int_lists():
    return st.lists(i32, max_size=8) | st.lists(st.integers(1, 8), min_size=257, max_size=300)


STRATEGY_TEXT = st.one_of(
    st.sampled_from(["precision=bf16,checkpoint=full", "mbs=4,ga=2,precision=fp32",
                     '{"precision": "bf16"}', '["zero2", ("amp_native", {"dtype": "bf16"}), '
                     '"checkpoint"]', "[" * 200, "mbs=-1", "mbs=99999999999999999999", "=,=,",
                     "precision=bf16,precision=fp32", '["fsdp", ("x", {"y": [[[[1]]]]})]']),
    text, json_values(10).map(json.dumps))

# Each fuzzed field of the request: a setter taking the message and a drawn value.
SUBMIT_FIELDS = {
    "model.family": (names(["gpt2", "llama", "bert", "mixtral", "torchscript", "GPT2", ""]),
                     lambda r, v: setattr(r.model, "family", v)),
    "model.config_json": (model_configs(), lambda r, v: setattr(r.model, "config_json", v)),
    "model.overrides": (st.lists(override, max_size=4) | st.lists(override, min_size=65,
                                                                  max_size=70),
                        lambda r, v: r.model.overrides.extend(v)),
    "model.new_overrides": (st.lists(override, max_size=3),
                            lambda r, v: r.model.new_overrides.extend(v)),
    "model.script": (st.binary(max_size=200), lambda r, v: setattr(r.model, "script", v)),
    "model.input_spec": (st.one_of(text, st.sampled_from(
        ["input_ids:int64[B,T]<50257; labels=input_ids", "x:float32[B,T,T,T,T,T,T]",
         "x:int64[B,99999999999]<1", "a:int64[B,T]<0; labels=a", ";;;"])),
        lambda r, v: setattr(r.model, "input_spec", v)),
    "seq_len": (i32, lambda r, v: setattr(r, "seq_len", v)),
    "global_batch_size": (i32, lambda r, v: setattr(r, "global_batch_size", v)),
    "time_limit_seconds": (f64, lambda r, v: setattr(r, "time_limit_seconds", v)),
    "max_trials": (i32, lambda r, v: setattr(r, "max_trials", v)),
    "world_size": (i32, lambda r, v: setattr(r, "world_size", v)),
    "device_type": (names(["cpu", "cuda", "musa", "", "CPU", "x" * 33]),
                    lambda r, v: setattr(r, "device_type", v)),
    "micro_batch_sizes": (int_lists(), lambda r, v: r.micro_batch_sizes.extend(v)),
    "warmup_steps": (i32, lambda r, v: setattr(r, "warmup_steps", v)),
    "measured_steps": (i32, lambda r, v: setattr(r, "measured_steps", v)),
    "trial_timeout_seconds": (f64, lambda r, v: setattr(r, "trial_timeout_seconds", v)),
    "precisions": (name_lists(["fp32", "bf16", "fp16", "pure_bf16"]),
                   lambda r, v: r.precisions.extend(v)),
    "checkpointings": (name_lists(["none", "selective", "full"]),
                       lambda r, v: r.checkpointings.extend(v)),
    "checkpoint_percents": (int_lists(), lambda r, v: r.checkpoint_percents.extend(v)),
    "attentions": (name_lists(["math", "sdpa"]), lambda r, v: r.attentions.extend(v)),
    "optimizers": (name_lists(["adamw", "fused_adamw"]), lambda r, v: r.optimizers.extend(v)),
    "offloads": (name_lists(["none", "cpu"]), lambda r, v: r.offloads.extend(v)),
    "tensor_parallel_sizes": (int_lists(), lambda r, v: r.tensor_parallel_sizes.extend(v)),
    "pipeline_parallel_sizes": (int_lists(), lambda r, v: r.pipeline_parallel_sizes.extend(v)),
    "shardings": (name_lists(["none", "zero1", "zero2", "fsdp"]),
                  lambda r, v: r.shardings.extend(v)),
    "pipeline_schedules": (name_lists(["1f1b", "interleaved"]),
                           lambda r, v: r.pipeline_schedules.extend(v)),
    "virtual_stages": (int_lists(), lambda r, v: r.virtual_stages.extend(v)),
    "sequence_parallel": (name_lists(["on", "off"]), lambda r, v: r.sequence_parallel.extend(v)),
    "algorithm": (names(["auto", "exhaustive", "greedy", "bayes", "halving", ""]),
                  lambda r, v: setattr(r, "algorithm", v)),
    "include": (name_lists(["zero2", "amp_native", "checkpoint", "fsdp", "tp"]),
                lambda r, v: r.include.extend(v)),
    "exclude": (name_lists(["zero2", "amp_native", "checkpoint", "fsdp", "tp"]),
                lambda r, v: r.exclude.extend(v)),
    "load_strategy": (STRATEGY_TEXT, lambda r, v: setattr(r, "load_strategy", v)),
    "finetune": (st.booleans(), lambda r, v: setattr(r, "finetune", v)),
    "store_partial": (st.booleans(), lambda r, v: setattr(r, "store_partial", v)),
    "min_measured_seconds": (f64, lambda r, v: setattr(r, "min_measured_seconds", v)),
    "force": (st.booleans(), lambda r, v: setattr(r, "force", v)),
    "launcher": (names(["hf-llama-tiny", "", "x" * 65]), lambda r, v: setattr(r, "launcher", v)),
}


class Tally:
    """Requests, answers and rejections per RPC (thread-safe)."""

    def __init__(self, vocabulary):
        self.lock = threading.Lock()
        self.sent = collections.Counter()
        self.codes = collections.defaultdict(collections.Counter)  # rpc -> code -> n
        self.unnamed = collections.defaultdict(collections.Counter)  # (rpc, code) -> pattern -> n
        self.named = collections.Counter()  # rpc -> rejections naming a field
        self.examples = collections.defaultdict(list)  # (rpc, code) -> a few named messages
        self.vocabulary = vocabulary

    def names_field(self, message):
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message))
        return bool(words & self.vocabulary)

    def record(self, rpc, code, message=""):
        with self.lock:
            self.sent[rpc] += 1
            self.codes[rpc][code] += 1
            if code == "OK":
                return
            if self.names_field(message):
                self.named[rpc] += 1
                seen = self.examples[(rpc, code)]
                if len(seen) < 3 and message[:60] not in [m[:60] for m in seen]:
                    seen.append(message)
            else:
                pattern = re.sub(r"\d+", "N", message)[:160]
                self.unnamed[(rpc, code)][pattern] += 1

    def call(self, rpc, fn, *args, **kwargs):
        try:
            answer = fn(*args, **kwargs)
            self.record(rpc, "OK")
            return answer
        except grpc.RpcError as e:
            self.record(rpc, e.code().name, e.details() or "")
            return None


def field_vocabulary(pb2):
    """Every field name of the proto's messages, plus the names errors use for
    what is inside a field (config keys, spec keys, bounds' rows)."""
    words = set(GPT_KEYS) | set(SPEC_KEYS) | {"time_limit", "model_config", "override", "overrides", "space", "model_file",
                             "spec_json", "trial_id", "config", "strategy", "launcher",
                             "session_token", "job_id", "page_token", "worker_id"}
    for message in pb2.DESCRIPTOR.message_types_by_name.values():
        stack = [message]
        while stack:
            m = stack.pop()
            for f in m.fields:
                words.add(f.name)
            stack.extend(m.nested_types)
    return words


def base_request(pb2, time_limit=30.0):
    r = pb2.TuneRequest()
    r.model.family = "gpt2"
    r.model.config_json = json.dumps(TINY_GPT)
    r.seq_len = 16
    r.global_batch_size = 4
    r.time_limit_seconds = time_limit
    r.max_trials = 2
    r.device_type = "cpu"
    r.force = True
    return r


def check_alive(daemons, what):
    for d in daemons:
        if not d.alive():
            print(f"CRASH: {d.name} (pid {d.pid}) exited with {d.proc.poll()} after {what}",
                  file=sys.stderr)
            print(open(d.log_path, errors="replace").read()[-4000:], file=sys.stderr)
            raise SystemExit(1)


def run_examples(strategy, n, seed, body):
    """Runs body(value) on n values drawn by hypothesis (no shrinking, no database)."""
    from hypothesis import seed as hseed

    if n <= 0:
        return

    @hseed(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def test(value):
        body(value)

    test()


# ---- wire-level requests ---------------------------------------------------------------

def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def wrap(path, leaf):
    """leaf (a whole tag+value) nested in the length-delimited fields of `path` (outermost first)."""
    for number in reversed(path):
        leaf = varint(number << 3 | 2) + varint(len(leaf)) + leaf
    return leaf


def field_paths(descriptor, depth=0, prefix=(), names=()):
    """(numbers, dotted name, field) of every scalar field, nested messages up to 3 deep."""
    for f in descriptor.fields:
        if f.message_type is not None:
            if depth < 3:
                yield from field_paths(f.message_type, depth + 1, prefix + (f.number,),
                                       names + (f.name,))
        else:
            yield prefix + (f.number,), ".".join(names + (f.name,)), f


def wire_cases(pb2, message_name, valid_bytes):
    """(label, bytes) of requests the message API cannot make."""
    descriptor = pb2.DESCRIPTOR.message_types_by_name[message_name]
    cases = []
    for path, name, f in field_paths(descriptor):
        if f.type == f.TYPE_STRING:
            leaf = varint(path[-1] << 3 | 2) + varint(3) + b"\xff\xfe\xc0"
            cases.append((f"invalid UTF-8 in {name}", valid_bytes + wrap(path[:-1], leaf)))
        elif f.type in (f.TYPE_INT32,):
            leaf = varint(path[-1] << 3 | 0) + varint(2**63 + 12345)
            cases.append((f"64-bit varint in int32 {name}", valid_bytes + wrap(path[:-1], leaf)))
    cases.append(("truncated", valid_bytes[:-3]))
    cases.append(("length past the end", b"\x0a\xff\xff\xff\x0f" + b"x" * 10))
    cases.append(("varint of 11 bytes", b"\x08" + b"\xff" * 10 + b"\x01"))
    cases.append(("group tags", b"\x0b\x0c"))
    rng = __import__("random").Random(7)
    for i in range(40):
        cases.append((f"random bytes #{i}", bytes(rng.randrange(256) for _ in range(
            rng.randrange(1, 200)))))
    return cases


def raw_method(channel, path):
    return channel.unary_unary(path, request_serializer=None, response_deserializer=None)


# ---- the coordinator the worker registers with -----------------------------------------

def start_fake_coordinator(pb2, pb2_grpc):
    registered = {}
    event = threading.Event()

    class Registry(pb2_grpc.WorkerRegistryServicer):
        def Register(self, request, context):
            registered["address"] = request.address
            registered["devices"] = len(request.devices)
            event.set()
            return pb2.RegisterResponse(heartbeat_interval_seconds=1.0,
                                        session_token=SESSION_TOKEN)

        def Heartbeat(self, request, context):
            if request.session_token != SESSION_TOKEN:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, "not this session")
            return pb2.HeartbeatResponse()

    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
    pb2_grpc.add_WorkerRegistryServicer_to_server(Registry(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port, registered, event


def trial_spec(**changes):
    spec = {"rank": 0, "world_size": 1, "local_rank": 0, "master_addr": "127.0.0.1",
            "master_port": 0, "model_family": "gpt2", "model_config": dict(TINY_GPT),
            "seq_len": 16, "global_batch_size": 4,
            "strategy": {"micro_batch_size": 4, "grad_accum_steps": 1, "precision": "fp32",
                         "checkpointing": "none", "attention": "sdpa"},
            "warmup_steps": 1, "measured_steps": 2, "min_measured_seconds": 0.0, "seed": 1}
    spec.update(changes)
    return spec


SPEC_KEYS = list(trial_spec()) + ["memory_limit_bytes", "device", "num_threads", "peak_tflops",
                                  "bucket_bytes", "report_parameter_digest", "model_file",
                                  "trial_id", "attempt", "launcher", "env", "runner"]


@st.composite
def spec_jsons(draw):
    kind = draw(st.integers(0, 19))
    if kind == 2:  # valid: the worker runs it
        return json.dumps(trial_spec())
    if kind == 0:
        return draw(st.one_of(text, json_values().map(json.dumps)))
    if kind == 1:
        return nested_json(draw(st.sampled_from([64, 65, 1000])), draw(st.integers(0, 1)))
    spec = trial_spec()
    for key in draw(st.lists(st.sampled_from(SPEC_KEYS), min_size=1, max_size=4)):
        if draw(st.booleans()) and key in spec:
            del spec[key]
        else:
            spec[key] = draw(st.one_of(i64, f64.filter(math.isfinite), json_values(5),
                                       st.sampled_from(["/etc/passwd", "../../x", "/bin/sh",
                                                        "10.0.0.1", 10**30]),
                                       short_text))
    return json.dumps(spec)


TRIAL_IDS = st.one_of(st.sampled_from(["t1", "job-1-t0", "../x", "a/b", "", ".", "..",
                                       "x" * 300, "t\x00", "-rf"]), short_text)


@st.composite
def run_trial_requests(draw):
    return dict(trial_id=draw(st.one_of(st.just("t1"), TRIAL_IDS)),
                attempt=draw(st.one_of(st.just(1), i32)),
                device_index=draw(st.one_of(st.integers(-2, 3), i32)),
                spec_json=draw(spec_jsons()),
                timeout_seconds=draw(st.one_of(st.sampled_from([0.5, 2.0, 5.0]), f64)),
                model_file=draw(st.binary(max_size=64)),
                launcher=draw(st.one_of(st.just(""), names(["hf-llama-tiny", "x" * 65]))),
                local_world_size=draw(st.one_of(st.just(0), i32)),
                group_rank=draw(st.one_of(st.just(0), i32)),
                local_device_indices=draw(st.lists(st.one_of(st.integers(-1, 3), i32),
                                                   max_size=4)))


@st.composite
def register_requests(draw):
    ndev = draw(st.sampled_from([0, 1, 2, 8, 1024, 1025, 2000]))
    many = ndev > 8
    devices = []
    for i in range(ndev):
        if many:  # do not draw 2000 devices one by one
            devices.append(dict(type="cpu", index=i, memory_bytes=1 << 30, name="cpu"))
            continue
        devices.append(dict(
            type=draw(names(["cpu", "cuda", "musa", "", "x" * 40])),
            index=draw(st.one_of(st.integers(0, 3), i32)),
            memory_bytes=draw(i64), name=draw(st.one_of(short_text, big_text)),
            peak=dict(fp32=draw(f64), bf16=draw(f64), fp16=draw(f64))))
    return dict(
        worker_id=draw(st.one_of(st.sampled_from(["w1", "w2", "", "x" * 257]), short_text)),
        address=draw(st.one_of(
            st.sampled_from(["127.0.0.1:1", "127.0.0.1:0", "localhost:65536", "[::1]:9",
                             "unix:/tmp/x", "", ":", "x" * 513, "127.0.0.1:-5"]), short_text)),
        devices=devices,
        rendezvous_port_min=draw(i32), rendezvous_port_max=draw(i32),
        host_cpu_cores=draw(i32), host_memory_bytes=draw(i64),
        launchers=draw(st.lists(st.builds(dict, name=names(["hf", "x" * 65]),
                                          format=names(["hf-trainer", "deepspeed", ""]),
                                          dimensions=st.lists(short_text, max_size=3)),
                                max_size=3)),
        session_token=draw(st.one_of(st.just(""), short_text)),
        tls=draw(st.booleans()), insecure=draw(st.one_of(st.just(""), short_text)))


def to_register(pb2, d):
    r = pb2.RegisterRequest(worker_id=d["worker_id"], address=d["address"],
                            rendezvous_port_min=d["rendezvous_port_min"],
                            rendezvous_port_max=d["rendezvous_port_max"],
                            host_cpu_cores=d["host_cpu_cores"],
                            host_memory_bytes=d["host_memory_bytes"],
                            session_token=d["session_token"], tls=d["tls"],
                            insecure=d["insecure"])
    for dev in d["devices"]:
        p = r.devices.add(type=dev["type"], index=dev["index"], memory_bytes=dev["memory_bytes"],
                          name=dev["name"])
        if "peak" in dev:
            p.peak_tflops.fp32 = dev["peak"]["fp32"]
            p.peak_tflops.bf16 = dev["peak"]["bf16"]
            p.peak_tflops.fp16 = dev["peak"]["fp16"]
    for lau in d["launchers"]:
        r.launchers.add(name=lau["name"], format=lau["format"], dimensions=lau["dimensions"])
    return r


# ---- the report --------------------------------------------------------------------------

def print_tally(tally):
    print("\n== requests and answers per RPC")
    for rpc in sorted(tally.sent):
        codes = ", ".join(f"{c} {n}" for c, n in tally.codes[rpc].most_common())
        rejected = sum(n for c, n in tally.codes[rpc].items() if c != "OK")
        print(f"{rpc:28s} sent {tally.sent[rpc]:6d}: {codes}; rejections naming a field: "
              f"{tally.named[rpc]}/{rejected}")
    print("\n== examples of rejections naming a field")
    for (rpc, code), messages in sorted(tally.examples.items()):
        for m in messages:
            print(f"{rpc} {code}: {m[:200]!r}")
    print("\n== rejections whose message names no field of the request (digits as N)")
    if not tally.unnamed:
        print("(none)")
    for (rpc, code), patterns in sorted(tally.unnamed.items()):
        for pattern, n in patterns.most_common():
            print(f"{rpc} {code} x{n}: {pattern!r}")


def check_database(db, accepted_ids):
    """The database after the server stopped: a list of problems (empty = consistent)."""
    problems = []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    q = lambda sql: con.execute(sql).fetchall()  # noqa: E731
    integrity = q("PRAGMA integrity_check")
    print(f"integrity_check: {integrity[0][0] if len(integrity) == 1 else integrity}")
    if integrity != [("ok",)]:
        problems.append(f"integrity_check: {integrity}")
    fk = q("PRAGMA foreign_key_check")
    if fk:
        problems.append(f"foreign_key_check: {fk[:5]} ({len(fk)} rows)")
    jobs = q("SELECT job_id, state, finished_at, best_trial_id, request_json FROM jobs")
    trials = q("SELECT trial_id, job_id, status FROM trials")
    job_state = {j[0]: j[1] for j in jobs}
    trial_ids = {t[0] for t in trials}
    orphans = [t for t in trials if t[1] not in job_state]
    unfinished_jobs = [j[:2] for j in jobs if j[1] not in TERMINAL_JOB]
    no_finish = [j[:2] for j in jobs if j[1] in TERMINAL_JOB and j[2] == 0]
    open_trials = [t for t in trials if t[2] not in TERMINAL_TRIAL and
                   job_state.get(t[1]) in TERMINAL_JOB]
    bad_best = [j[:2] for j in jobs if j[3] and j[3] not in trial_ids]
    bad_json = []
    for j in jobs:
        try:
            json.loads(j[4])
        except ValueError:
            bad_json.append(j[0])
    missing = sorted(set(accepted_ids) - set(job_state))
    states = collections.Counter(j[1] for j in jobs)
    tstates = collections.Counter(t[2] for t in trials)
    print(f"jobs: {len(jobs)} rows {dict(states)}; trials: {len(trials)} rows {dict(tstates)}")
    for label, rows in [("trials without their job", orphans),
                        ("jobs not terminal after the server stopped", unfinished_jobs),
                        ("terminal jobs without finished_at", no_finish),
                        ("unfinished trials of finished jobs", open_trials),
                        ("best_trial_id naming no trial", bad_best),
                        ("request_json that is not JSON", bad_json),
                        ("accepted jobs without a row", missing)]:
        print(f"{label}: {len(rows)}" + (f" e.g. {rows[:3]}" if rows else ""))
        if rows:
            problems.append(f"{label}: {len(rows)}")
    con.close()
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(grpc_bench.REPO, "build", "bin"))
    ap.add_argument("--submit", type=int, default=3000)
    ap.add_argument("--register", type=int, default=1500)
    ap.add_argument("--register-jobs-every", type=int, default=50,
                    help="a 5 s tiny job after every Nth registration (0: none)")
    ap.add_argument("--others", type=int, default=300)
    ap.add_argument("--run-trial", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    bin_dir = os.path.abspath(args.bin)
    tmp = tempfile.mkdtemp(prefix="autoaccel-api-fuzz-")
    pb2, pb2_grpc = grpc_bench.load_stubs(os.path.join(tmp, "stubs"))
    tally = Tally(field_vocabulary(pb2))
    series = collections.defaultdict(list)  # phase -> RSS after each tenth of it
    started = time.time()
    print(f"api_fuzz: binaries {bin_dir}, folder {tmp}, seed {args.seed}")

    server, address = grpc_bench.start_server(
        bin_dir, tmp, ["--worker-timeout", "3", "--heartbeat-interval", "1"])
    rss = collections.OrderedDict(start=server.rss())
    channel = grpc.insecure_channel(address, options=[
        ("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)])
    tuning = pb2_grpc.TuningServiceStub(channel)
    registry = pb2_grpc.WorkerRegistryStub(channel)
    accepted = []
    job_ids = []

    # 1. SubmitJob.
    count = [0]
    fields = st.dictionaries(st.sampled_from(sorted(SUBMIT_FIELDS)), st.just(None), min_size=1,
                             max_size=5).flatmap(lambda chosen: st.fixed_dictionaries(
                                 {k: SUBMIT_FIELDS[k][0] for k in chosen}))

    def submit(values):
        r = base_request(pb2)
        for k, v in values.items():
            SUBMIT_FIELDS[k][1](r, v)
        job = tally.call("SubmitJob", tuning.SubmitJob, pb2.SubmitJobRequest(request=r),
                         timeout=30)
        check_alive([server], f"SubmitJob {str(r)[:2000]}")
        if job is not None:
            accepted.append(job.job_id)
            job_ids.append(job.job_id)
            tally.call("CancelJob(after submit)", tuning.CancelJob,
                       pb2.CancelJobRequest(job_id=job.job_id), timeout=30)
        count[0] += 1
        if count[0] % max(1, args.submit // 10) == 0:
            series["SubmitJob"].append(server.rss())

    run_examples(fields, args.submit, args.seed, submit)
    rss["after SubmitJob"] = server.rss()
    print(f"[{time.time() - started:.0f}s] SubmitJob done: {len(accepted)} accepted",
          flush=True)

    # 2. Register (a tiny 5 s job every 50th, left to run onto the fuzzed workers).
    count[0] = 0

    def register(d):
        tally.call("Register", registry.Register, to_register(pb2, d), timeout=30)
        check_alive([server], f"Register {json.dumps(d)[:2000]}")
        count[0] += 1
        if args.register_jobs_every and count[0] % args.register_jobs_every == 0:
            job = tally.call("SubmitJob(5 s, onto fuzzed workers)", tuning.SubmitJob,
                             pb2.SubmitJobRequest(request=base_request(pb2, 5.0)), timeout=30)
            if job is not None:
                accepted.append(job.job_id)
                job_ids.append(job.job_id)
        if count[0] % 10 == 0:
            tally.call("Heartbeat", registry.Heartbeat, pb2.HeartbeatRequest(
                worker_id=d["worker_id"], session_token=d["session_token"]), timeout=30)
        if count[0] % max(1, args.register // 10) == 0:
            series["Register"].append(server.rss())

    run_examples(register_requests(), args.register, args.seed, register)
    rss["after Register"] = server.rss()
    print(f"[{time.time() - started:.0f}s] Register done", flush=True)

    # 3. The other client RPCs.
    ids = st.one_of(st.sampled_from(job_ids or ["x"]), TRIAL_IDS)

    def others(v):
        job_id, token, size = v
        tally.call("GetJob", tuning.GetJob, pb2.GetJobRequest(job_id=job_id), timeout=30)
        tally.call("ListTrials", tuning.ListTrials, pb2.ListTrialsRequest(
            job_id=job_id, page_size=size, page_token=token, include_pruned=True), timeout=30)
        tally.call("ListJobs", tuning.ListJobs, pb2.ListJobsRequest(limit=size), timeout=30)
        tally.call("CancelJob", tuning.CancelJob, pb2.CancelJobRequest(job_id=job_id), timeout=30)
        try:
            for _ in tuning.WatchJob(pb2.WatchJobRequest(job_id=job_id, include_pruned=True),
                                     timeout=0.5):
                pass
            tally.record("WatchJob", "OK")
        except grpc.RpcError as e:
            # A live job's stream outlasts the 0.5 s deadline: that is not a rejection.
            code = e.code().name
            tally.record("WatchJob", "OK (deadline)" if code == "DEADLINE_EXCEEDED" else code,
                         e.details() or "")
        check_alive([server], f"job_id {job_id!r} page_token {token!r} size {size}")

    run_examples(st.tuples(ids, st.one_of(st.just(""), short_text, st.sampled_from(
        ["0", "-1", "999999999999", "abc", "1e9"])), i32), args.others, args.seed, others)
    rss["after other RPCs"] = server.rss()

    # 4. Wire-level requests to the server.
    valid_submit = pb2.SubmitJobRequest(request=base_request(pb2)).SerializeToString()
    wire_codes = collections.defaultdict(collections.Counter)
    submit_raw = raw_method(channel, "/autoaccel.v1.TuningService/SubmitJob")
    register_raw = raw_method(channel, "/autoaccel.v1.WorkerRegistry/Register")
    valid_register = to_register(pb2, dict(
        worker_id="wire", address="127.0.0.1:1", devices=[], rendezvous_port_min=0,
        rendezvous_port_max=0, host_cpu_cores=1, host_memory_bytes=1 << 30, launchers=[],
        session_token="", tls=False, insecure="")).SerializeToString()

    def wire(rpc, method, cases):
        for label, data in cases:
            kind = re.sub(r" in .*| #\d+", "", label)
            try:
                answer = method(data, timeout=30)
                tally.record(rpc + " (wire)", "OK")
                wire_codes[(rpc, kind)]["OK"] += 1
                if rpc == "SubmitJob":
                    job = pb2.Job.FromString(answer)
                    accepted.append(job.job_id)
                    tuning.CancelJob(pb2.CancelJobRequest(job_id=job.job_id), timeout=30)
            except grpc.RpcError as e:
                tally.record(rpc + " (wire)", e.code().name, e.details() or "")
                wire_codes[(rpc, kind)][e.code().name] += 1
            check_alive([server], f"{rpc} wire case {label}")

    wire("SubmitJob", submit_raw, wire_cases(pb2, "SubmitJobRequest", valid_submit))
    wire("Register", register_raw, wire_cases(pb2, "RegisterRequest", valid_register))
    rss["end"] = server.rss()
    server_peak = server.peak_rss()

    # 5. RunTrial / CancelTrial on a real worker that registered with us.
    fake, fake_port, registered, event = start_fake_coordinator(pb2, pb2_grpc)
    work = os.path.join(tmp, "work")
    worker = grpc_bench.Daemon("autoaccel-worker", [
        grpc_bench.binary(bin_dir, "autoaccel-worker"), "--coordinator",
        f"127.0.0.1:{fake_port}", "--listen", "127.0.0.1:0", "--devices", "cpu:2",
        "--work-dir", work, "--log-level", "warn", "--threads-per-device", "1"],
        os.path.join(tmp, "worker.log"))
    if not event.wait(60):
        check_alive([worker], "start")
        raise SystemExit("the worker did not register with the fuzzer's coordinator in 60 s")
    wchannel = grpc.insecure_channel(registered["address"])
    wstub = pb2_grpc.WorkerServiceStub(wchannel)
    auth = [("authorization", f"Bearer {SESSION_TOKEN}")]
    worker_rss = collections.OrderedDict(start=worker.rss())
    count[0] = 0
    ran = collections.Counter()

    def run_trial(d):
        count[0] += 1
        request = pb2.RunTrialRequest(**d)
        metadata = auth
        if count[0] % 25 == 0:
            metadata = [("authorization", "Bearer not-the-session-token-000000")]
        elif count[0] % 25 == 1:
            metadata = []
        answer = tally.call("RunTrial", wstub.RunTrial, request, metadata=metadata, timeout=20)
        if answer is not None:
            ran[answer.status] += 1
        tally.call("CancelTrial", wstub.CancelTrial, pb2.CancelTrialRequest(
            trial_id=d["trial_id"], attempt=d["attempt"]), metadata=metadata, timeout=20)
        check_alive([worker], f"RunTrial {str(request)[:2000]}")
        if count[0] % max(1, args.run_trial // 10) == 0:
            series["RunTrial (worker)"].append(worker.rss())

    run_examples(run_trial_requests(), args.run_trial, args.seed, run_trial)
    valid_run = pb2.RunTrialRequest(trial_id="wire", attempt=1, device_index=0,
                                    spec_json=json.dumps(trial_spec())).SerializeToString()
    run_raw = wchannel.unary_unary("/autoaccel.v1.WorkerService/RunTrial",
                                   request_serializer=None, response_deserializer=None)
    wire("RunTrial", lambda data, timeout: run_raw(data, timeout=timeout, metadata=auth),
         wire_cases(pb2, "RunTrialRequest", valid_run))
    worker_rss["end"] = worker.rss()
    worker_peak = worker.peak_rss()
    check_alive([server, worker], "the whole run")
    leftover = subprocess.run(["pgrep", "-P", str(worker.pid)], capture_output=True,
                              text=True).stdout.split()

    # The report.
    print_tally(tally)
    print("\n== wire-level requests: answers by kind")
    for (rpc, kind), codes in sorted(wire_codes.items()):
        print(f"{rpc:10s} {kind:34s} " + ", ".join(f"{c} {n}" for c, n in codes.most_common()))
    print(f"\nRunTrial that ran to an answer: {dict(ran)}; worker children left: {len(leftover)}")
    print("\n== memory (VmRSS)")
    print("server: " + ", ".join(f"{k} {grpc_bench.mib(v)}" for k, v in rss.items()) +
          f"; peak {grpc_bench.mib(server_peak)}")
    print("worker: " + ", ".join(f"{k} {grpc_bench.mib(v)}" for k, v in worker_rss.items()) +
          f"; peak {grpc_bench.mib(worker_peak)}")
    for phase, values in series.items():
        print(f"{phase}, after each tenth: " + " ".join(f"{v / (1 << 20):.1f}" for v in values)
              + " MiB")
    print("\n== crashes: 0 (server and worker alive after every request)")
    worker.stop()
    fake.stop(0)
    code = server.stop()
    print(f"server stopped (SIGTERM): exit code {code}")
    print("\n== database after the stop")
    problems = check_database(os.path.join(tmp, "server.db"), accepted)
    print(f"\naccepted jobs: {len(accepted)}; elapsed {time.time() - started:.0f} s; "
          f"database problems: {len(problems)}")
    if not args.keep and not problems:
        subprocess.run(["rm", "-rf", tmp])
    return 1 if problems or code not in (0, None) else 0


if __name__ == "__main__":
    sys.exit(main())
