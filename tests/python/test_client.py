"""The Python client (autoaccel.Client) against a live cluster: a real
autoaccel-server and two autoaccel-worker processes on 127.0.0.1 (ports
picked by the kernel, read back from their "listening on" lines), over TLS
with users' tokens issued by deploy/tls/make-certs and make-tokens; export
and estimate computed by the coordinator (no CLI).

Needs AUTOACCEL_SERVER_BIN and AUTOACCEL_WORKER_BIN (the binaries; the
worker finds autoaccel-trial beside itself). With
AUTOACCEL_CLIENT_INSTALLED=1 it also checks that it runs the package as pip
installed it (tests/python.cmake runs it in a fresh virtual environment
holding only `pip install ./python`).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import autoaccel
from autoaccel import Client, errors, results
from live_daemons import TINY_GPT2, Daemon, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER = os.environ.get("AUTOACCEL_SERVER_BIN", "")
WORKER = os.environ.get("AUTOACCEL_WORKER_BIN", "")
# Run by CTest: the binaries are given, so none of the tests below may skip.
INSTALLED = os.environ.get("AUTOACCEL_CLIENT_INSTALLED") == "1"
# One warm-up and one measured step, timed for at least 0.2 s.
QUICK = dict(seq_len=16, global_batch_size=4, warmup_steps=1, measured_steps=1,
             min_measured_time=0.2)


def run(argv, cwd):
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError("%s failed:\n%s%s" % (argv, done.stdout, done.stderr))


def read_token(path):
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


class PackageTest(unittest.TestCase):
    def test_the_package_imported_is_the_one_pip_installed(self):
        if not INSTALLED:
            self.skipTest("not run from the fresh virtual environment")
        self.assertTrue(os.path.realpath(autoaccel.__file__).startswith(
            os.path.realpath(sys.prefix) + os.sep), autoaccel.__file__)
        self.assertNotEqual(sys.prefix, sys.base_prefix, "not a virtual environment")

    def test_stubs_were_generated_from_this_proto(self):
        import hashlib
        from autoaccel import _proto
        with open(os.path.join(ROOT, "proto", "autoaccel.proto"), "rb") as f:
            self.assertEqual(_proto.PROTO_SHA256, hashlib.sha256(f.read()).hexdigest(),
                             "the stubs are stale: reinstall the package (pip install ./python)")

    def test_training_scripts_import_the_package_without_grpc(self):
        # autoaccel.trial runs inside users' training scripts, with the
        # standard library only: grpc and protobuf made unimportable.
        code = ("import sys; sys.modules['grpc'] = None; sys.modules['google.protobuf'] = None\n"
                "import autoaccel, autoaccel.trial\n"
                "assert not autoaccel.current().active\n"
                "try:\n    from autoaccel import Client\nexcept ImportError:\n    print('lazy')\n")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), "lazy")

    def test_results_carry_every_field_of_the_proto(self):
        import dataclasses
        from autoaccel._proto import autoaccel_pb2 as pb
        pairs = {results.Strategy: pb.Strategy, results.TrialMetrics: pb.TrialMetrics,
                 results.Prediction: pb.Prediction, results.Trial: pb.Trial,
                 results.ProxyMeasurement: pb.ProxyMeasurement,
                 results.PrunedSummary: pb.PrunedSummary, results.Launcher: pb.Launcher,
                 results.StrategyStanding: pb.StrategyStanding,
                 results.StrategyAnswer: pb.StrategyAnswer, results.JobInfo: pb.Job,
                 results.JobEvent: pb.JobEvent, results.PeakTflops: pb.PeakTflops,
                 results.Device: pb.Device, results.Worker: pb.Worker,
                 results.RankLogFile: pb.RankLogFile, results.RankLogs: pb.RankLogs,
                 results.TrialLogs: pb.TrialLogs}
        for cls, message in pairs.items():
            self.assertEqual({f.name for f in dataclasses.fields(cls)},
                             {f.name for f in message.DESCRIPTOR.fields}, cls.__name__)


@unittest.skipUnless((SERVER and WORKER) or INSTALLED,
                     "AUTOACCEL_SERVER_BIN and AUTOACCEL_WORKER_BIN not set")
class LiveClusterTest(unittest.TestCase):
    """A coordinator with TLS and tokens (alice, carol, root the admin), and
    workers w1 and w2 with one CPU slot each."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="autoaccel-pyclient-")
        cls.daemons = []
        d = cls.dir
        try:
            run([os.path.join(ROOT, "deploy", "tls", "make-certs"), d,
                 "coordinator=127.0.0.1,localhost", "w1=127.0.0.1", "w2=127.0.0.1"], d)
            run([os.path.join(ROOT, "deploy", "tls", "make-tokens"), d, "alice", "carol",
                 "root:admin"], d)
            server = Daemon([SERVER, "--listen", "127.0.0.1:0", "--db", d + "/autoaccel.db",
                             "--heartbeat-interval", "0.5", "--worker-timeout", "3",
                             "--tls-cert", d + "/coordinator.pem", "--tls-key",
                             d + "/coordinator.key", "--tls-ca", d + "/ca.pem", "--tokens",
                             d + "/tokens", "--join-token-file", d + "/join-token"], d, "server")
            cls.daemons.append(server)
            cls.address = server.address()
            for name in ("w1", "w2"):
                port = free_port()
                cls.daemons.append(Daemon(
                    [WORKER, "--coordinator", cls.address, "--listen", "127.0.0.1:0",
                     "--devices", "cpu:1", "--id", name, "--threads-per-device", "1",
                     "--work-dir", d, "--rendezvous-ports", "%d-%d" % (port, port),
                     # Known peaks skip the GEMM probe.
                     "--peak-tflops", "fp32=0.1,bf16=0.4,fp16=0.01",
                     "--tls-cert", "%s/%s.pem" % (d, name), "--tls-key", "%s/%s.key" % (d, name),
                     "--tls-ca", d + "/ca.pem", "--join-token-file", d + "/join-token"],
                    d, name))
            cls.alice = cls.client("alice")
            end = time.monotonic() + 20
            while sum(w.healthy for w in cls.alice.workers()) < 2:
                if time.monotonic() > end:
                    raise AssertionError("the workers did not register:\n" + "\n".join(
                        w.output() for w in cls.daemons[1:]))
                time.sleep(0.1)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for daemon in reversed(cls.daemons):
            daemon.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def client(cls, user=None, **kwargs):
        """A client of `user` (their token file), trusting the cluster's CA."""
        if user is not None:
            kwargs["token_file"] = "%s/%s.token" % (cls.dir, user)
        return Client(cls.address, tls_ca=cls.dir + "/ca.pem", **kwargs)

    def logs(self):
        return "\n".join(d.output() for d in self.daemons)

    # export and estimate: computed by the coordinator, no CLI.

    def test_estimate_ranks_strategies_that_fit_a_catalog_device(self):
        e = self.alice.estimate("gpt2", config=TINY_GPT2, seq_len=16, global_batch_size=8,
                                 world_size=2, device="h100", top=3)
        self.assertEqual(e.model["family"], "gpt2")
        self.assertEqual(e.device["name"], "h100-sxm")
        self.assertEqual(e.world_size, 2)
        self.assertTrue(1 <= len(e.strategies) <= 3, e.strategies)
        self.assertGreaterEqual(e.candidates, e.fitting)
        speeds = [s.tokens_per_second for s in e.strategies]
        self.assertEqual(speeds, sorted(speeds, reverse=True))
        for s in e.strategies:
            self.assertTrue(s.fits)
            self.assertGreater(s.memory.total, 0)
            self.assertEqual(s.strategy_json["data_parallel"] * s.strategy_json["tensor_parallel"]
                             * s.strategy_json["pipeline_parallel"]
                             * s.strategy_json.get("context_parallel", 1), 2)
            c = s.communication
            self.assertAlmostEqual(c.tensor_parallel_bytes + c.context_parallel_bytes
                                   + c.expert_parallel_bytes + c.pipeline_parallel_bytes,
                                   c.model_parallel_bytes, delta=1e-6 * c.model_parallel_bytes)

    def test_estimate_ranks_fp8_when_asked_on_a_device_with_fp8(self):
        e = self.alice.estimate("gpt2", config=TINY_GPT2, seq_len=16, global_batch_size=8,
                                 device="h100", top=2, precisions=["pure_bf16", "fp8"])
        self.assertEqual(e.strategies[0].strategy_json["precision"], "fp8")
        self.assertGreater(e.strategies[0].memory.fp8_weight_copies, 0)
        with self.assertRaises(errors.InvalidArgumentError) as caught:
            self.alice.estimate("gpt2", config=TINY_GPT2, seq_len=16, global_batch_size=8,
                                 device="a100", top=1, precisions=["fp8"])
        self.assertIn("no fp8 tensor cores", str(caught.exception))

    def test_estimate_of_one_strategy_says_why_it_does_not_fit(self):
        e = self.alice.estimate("gpt2", config=TINY_GPT2, seq_len=16, global_batch_size=4,
                                 device="h100", strategy="mbs=4,precision=bf16",
                                 new_overrides=[], overrides=["n_embd=32"])
        (s,) = e.strategies
        self.assertTrue(s.fits, s.why_not)
        self.assertEqual(s.strategy_json["grad_accum_steps"], 1)
        self.assertIsNone(e.candidates)

    def test_estimate_sweeps_clusters_with_days_and_cost_and_a_choice(self):
        e = self.alice.estimate("gpt2", config=TINY_GPT2, seq_len=16, global_batch_size=8,
                                 devices=["h100", "h200"], world_sizes=[2, 4], top=1,
                                 tokens=10**9, price_per_gpu_hour=2.5, budget=1e9)
        self.assertIsNone(e.device)
        self.assertEqual([(c.device, c.world_size) for c in e.clusters],
                         [("h100-sxm", 2), ("h100-sxm", 4), ("h200", 2), ("h200", 4)])
        for c in e.clusters:
            t = c.fastest.training
            days = 1e9 / c.fastest.tokens_per_second / 86400
            self.assertAlmostEqual(t.days, days, delta=1e-9 * days)
            self.assertAlmostEqual(t.cost, days * 24 * 2.5 * c.world_size, delta=1e-6 * t.cost)
            self.assertGreaterEqual(c.safe.margin_fraction, 0.1)
        self.assertIsNotNone(e.choice["cluster"])
        self.assertGreater(e.training_band["fraction"], 0)

    def test_estimate_names_an_unknown_device(self):
        with self.assertRaises(errors.InvalidArgumentError) as caught:
            self.alice.estimate("gpt2", config=TINY_GPT2, seq_len=16, global_batch_size=4,
                                 device="no-such-gpu", top=1)
        self.assertIn("no-such-gpu", str(caught.exception))

    def test_export_writes_a_deepspeed_config_for_a_strategy(self):
        out = tempfile.mkdtemp(prefix="autoaccel-export-")
        self.addCleanup(shutil.rmtree, out)
        r = self.alice.export(strategy="dp=2,tp=1,pp=1,sharding=zero1,mbs=2,ga=2,precision=bf16",
                               world_size=2, global_batch_size=8, seq_len=16, format="deepspeed",
                               out_dir=os.path.join(out, "ds"))
        self.assertEqual(r.format, "deepspeed")
        self.assertEqual(r.nproc_per_node, 2)
        ds = json.loads(r.files["ds_config.json"])
        self.assertEqual(ds["zero_optimization"]["stage"], 1)
        self.assertEqual(ds["train_micro_batch_size_per_gpu"], 2)
        with open(os.path.join(out, "ds", "ds_config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f), ds)
        self.assertIn("deepspeed", r.command)
        self.assertTrue(all(row.status in ("exact", "approximated", "not_expressible")
                            for row in r.fidelity), r.fidelity)

    def test_export_refuses_bad_strategy_text(self):
        with self.assertRaises(errors.InvalidArgumentError) as caught:
            self.alice.export(strategy="mbs=two", world_size=1, global_batch_size=4, seq_len=16,
                               format="deepspeed")
        self.assertIn("mbs", str(caught.exception))

    def test_estimate_and_export_need_a_token_as_every_call(self):
        anonymous = self.client()
        with self.assertRaises(errors.UnauthenticatedError):
            anonymous.estimate("gpt2", config=TINY_GPT2, seq_len=16, global_batch_size=4,
                               device="h100", top=1)
        with self.assertRaises(errors.UnauthenticatedError):
            anonymous.export(strategy="mbs=4", world_size=1, global_batch_size=4, seq_len=16,
                             format="deepspeed")

    def test_export_never_replaces_a_file_in_out_dir(self):
        out = tempfile.mkdtemp(prefix="autoaccel-export-")
        self.addCleanup(shutil.rmtree, out)
        with open(os.path.join(out, "ds_config.json"), "w", encoding="utf-8") as f:
            f.write("mine")
        with self.assertRaises(errors.InvalidArgumentError) as caught:
            self.alice.export(strategy="mbs=4", world_size=1, global_batch_size=4, seq_len=16,
                              format="deepspeed", out_dir=out)
        self.assertIn("ds_config.json exists", str(caught.exception))
        with open(os.path.join(out, "ds_config.json"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "mine")

    def test_a_job_streams_its_trials_to_the_end_and_its_answer_is_recorded(self):
        job = self.alice.tune("gpt2", config=TINY_GPT2, time_limit=120, max_trials=2, force=True,
                              **QUICK)
        self.assertRegex(job.id, r"^job-")
        events = list(job.watch())
        states = [e.job.state for e in events]
        self.assertEqual(states[-1], "SUCCEEDED", (states, self.logs()))
        succeeded = [t.trial_id for e in events for t in e.trials if t.status == "SUCCEEDED"]
        self.assertGreaterEqual(len(succeeded), 1, events)
        self.assertEqual(len(succeeded), len(set(succeeded)), "a finished trial came twice")
        finished = set(succeeded)
        # Progress arrived over several events, not in one answer at the end.
        self.assertGreater(len(events), 1)
        done_counts = [e.job.trials_done for e in events]
        self.assertEqual(done_counts, sorted(done_counts))

        final = job.wait(timeout=30)
        self.assertEqual(final.state, "SUCCEEDED")
        self.assertEqual(final.owner, "alice")
        # How sure the job is of its answer, with its figure and interval.
        self.assertIn(final.best_certainty, ("settled", "tie", "provisional"))
        self.assertGreater(final.best_figure, 0)
        self.assertLessEqual(final.best_interval_low, final.best_figure)
        self.assertEqual(final.request["seq_len"], 16)
        best = final.best
        self.assertIsNotNone(best)
        self.assertGreater(best.metrics.tokens_per_second, 0)

        trials = self.alice.trials(job)
        stored = {t.trial_id: t for t in trials}
        self.assertLessEqual({t.trial_id for t in trials if t.status == "SUCCEEDED"}, finished)
        # Every streamed result is stored as it was streamed, unless a repeat on the other
        # worker disagreed with it beyond reason: then it is withdrawn, saying so (the tiny
        # model's timings can differ that much on a loaded machine).
        for trial_id in finished:
            t = stored[trial_id]
            if t.status != "SUCCEEDED":
                self.assertEqual(t.status, "FAILED", t)
                self.assertTrue(t.reason.startswith("distrusted: "), t)
        for t in trials:
            self.assertEqual(t.job_id, job.id)
            if t.status == "SUCCEEDED":
                self.assertGreater(t.metrics.measured_steps, 0)
                self.assertTrue(set(t.worker_ids) <= {"w1", "w2"}, t.worker_ids)
                self.assertEqual(t.strategy_json["micro_batch_size"],
                                 t.strategy.micro_batch_size)
        # Paged one trial at a time, the same list.
        self.assertEqual([t.trial_id for t in self.alice.trials(job.id, page_size=1)],
                         [t.trial_id for t in trials])

        answer = self.alice.best("gpt2", config=TINY_GPT2, seq_len=16, global_batch_size=4)
        self.assertIsNotNone(answer, final.status_message + "\n" + self.logs())
        self.assertEqual(answer.job_id, job.id)
        self.assertEqual(answer.strategy.text, best.strategy.text)
        self.assertIn(job.id, [a.job_id for a in self.alice.strategies(model_family="gpt2")])
        self.assertIsNone(self.alice.best("gpt2", config=TINY_GPT2, seq_len=16,
                                          global_batch_size=8))

        # A trial's output, from the worker that ran it: by the job and the
        # trial's index, or by the trial.
        first = next(t for t in trials if t.status == "SUCCEEDED")
        logs = self.alice.logs(job, first.index, tail=5)
        self.assertEqual(logs.trial_id, first.trial_id)
        self.assertIn(logs.worker_id, ("w1", "w2"))
        self.assertFalse(logs.logs.running)
        self.assertEqual([f.name for f in logs.logs.files], ["trial.log"])
        self.assertEqual(self.alice.logs(first).logs.directory, logs.logs.directory)
        with self.assertRaises(errors.PermissionDeniedError):
            self.client("carol").logs(first)

        # The job's best as DeepSpeed's config, computed by the coordinator
        # for alice.
        exported = self.alice.export(job, format="deepspeed")
        ds = json.loads(exported.files["ds_config.json"])
        self.assertEqual(ds["train_micro_batch_size_per_gpu"], best.strategy.micro_batch_size)
        self.assertEqual(ds["gradient_accumulation_steps"], best.strategy.grad_accum_steps)

    def test_workers_lists_both_workers_with_their_devices_over_tls(self):
        workers = {w.worker_id: w for w in self.alice.workers()}
        self.assertEqual(set(workers), {"w1", "w2"})
        for w in workers.values():
            self.assertTrue(w.healthy)
            self.assertTrue(w.tls)
            self.assertEqual(w.insecure, "")
            self.assertEqual([(d.type, d.index) for d in w.devices], [("cpu", 0)])
            self.assertAlmostEqual(w.devices[0].peak_tflops.fp32, 0.1)
            self.assertLess(w.rendezvous_port_min, w.rendezvous_port_max + 1)

    def test_a_cancelled_job_ends_cancelled_and_only_its_owner_may_cancel_it(self):
        job = self.alice.tune("gpt2", config=TINY_GPT2, time_limit=600, force=True, **QUICK)
        carol = self.client("carol")
        with self.assertRaises(errors.PermissionDeniedError) as caught:
            carol.cancel(job)
        self.assertTrue(caught.exception.message)
        with self.assertRaises(errors.PermissionDeniedError):
            carol.job(job.id)
        with self.assertRaises(errors.PermissionDeniedError):
            carol.export(job, format="deepspeed")
        self.assertNotIn(job.id, [j.job_id for j in carol.jobs()])
        # The admin sees it.
        self.assertEqual(self.client("root").job(job.id).info.owner, "alice")

        job.cancel()
        events = list(job.watch(timeout=60))
        self.assertEqual(events[-1].job.state, "CANCELLED", self.logs())
        self.assertEqual(job.refresh().state, "CANCELLED")

    def test_candidate_lists_take_comma_strings_as_the_cli_does(self):
        job = self.alice.tune("gpt2", config=TINY_GPT2, time_limit=60, max_trials=1, force=True,
                              precisions="fp32, bf16", micro_batch_sizes="1,2",
                              shardings=["none"], confirm_tolerance=0.03, **QUICK)
        request = job.info.request
        self.assertEqual(request["precisions"], ["fp32", "bf16"])
        self.assertEqual(request["micro_batch_sizes"], [1, 2])
        self.assertEqual(request["shardings"], ["none"])
        self.assertAlmostEqual(request["confirm_tolerance"], 0.03)
        job.cancel()
        with self.assertRaises(errors.InvalidArgumentError) as caught:
            self.alice.tune("gpt2", config=TINY_GPT2, micro_batch_sizes="1,two", **QUICK)
        self.assertIn("'two'", str(caught.exception))
        with self.assertRaises(TypeError) as caught:
            self.alice.tune("gpt2", config=TINY_GPT2, tp_size="2", **QUICK)
        self.assertIn("tp_sizes", str(caught.exception))

    def test_a_wrong_token_or_none_is_refused_as_unauthenticated(self):
        wrong = self.client(token="not-a-token-of-this-coordinator")
        with self.assertRaises(errors.UnauthenticatedError) as caught:
            wrong.workers()
        self.assertTrue(caught.exception.message)
        self.assertEqual(caught.exception.code, "UNAUTHENTICATED")
        # No token at all (and none in the environment or ~/.config).
        env = {k: os.environ.pop(k) for k in ("AUTOACCEL_TOKEN", "AUTOACCEL_TOKEN_FILE",
                                               "XDG_CONFIG_HOME") if k in os.environ}
        self.addCleanup(os.environ.update, env)
        os.environ["XDG_CONFIG_HOME"] = self.dir + "/no-config"
        with self.assertRaises(errors.UnauthenticatedError):
            self.client().jobs()

    def test_bad_requests_raise_the_servers_error(self):
        with self.assertRaises(errors.InvalidArgumentError) as caught:
            self.alice.tune("gpt2", config=TINY_GPT2, seq_len=0, global_batch_size=4)
        self.assertIn("seq_len", str(caught.exception))
        with self.assertRaises(errors.NotFoundError):
            self.alice.job("job-that-does-not-exist")
        with self.assertRaises(errors.NotFoundError):
            self.alice.export("job-that-does-not-exist", format="deepspeed")

    def test_plaintext_against_the_tls_port_is_unavailable(self):
        plain = Client(self.address, token_file=self.dir + "/alice.token", timeout=5)
        with self.assertRaises((errors.UnavailableError, errors.DeadlineExceededError)):
            plain.workers()


if __name__ == "__main__":
    unittest.main()
