"""autoaccel.trial: the lines it writes are the metrics protocol's, it does
nothing standalone, and run_loop reports warm-up + measured steps and OOM."""

import json
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import worker_sim  # noqa: E402

from autoaccel import trial as aa  # noqa: E402


def active_trial(tmp, warmup=1, measured=2, global_batch=8, seq_len=16):
    return aa.Trial(active=True, rank=0, world_size=1, strategy={"micro_batch_size": 8},
                    seq_len=seq_len, global_batch_size=global_batch, warmup_steps=warmup,
                    measured_steps=measured, metrics_file=os.path.join(tmp, "metrics.jsonl"))


def lines(trial):
    with open(trial.metrics_file, encoding="utf-8") as f:
        return f.read()


class ReportingTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def test_a_step_is_the_contracts_line(self):
        t = active_trial(self.tmp)
        t.report_step(3, 0.41, tokens=4096, samples=8, loss=7.1, peak_memory_bytes=123456789)
        self.assertEqual(lines(t), '{"event": "step", "step": 3, "step_time_s": 0.41, '
                         '"tokens": 4096, "samples": 8, "loss": 7.1, '
                         '"peak_memory_bytes": 123456789}\n')

    def test_oom_model_and_ready_lines(self):
        t = active_trial(self.tmp)
        t.report_model(124439808)
        t.report_oom("CUDA out of memory. Tried to allocate 2.00 GiB")
        t.report_ready()
        t.report_ready()  # once per process
        text = lines(t).splitlines()
        self.assertEqual(text[0], '{"event": "model", "parameters": 124439808}')
        self.assertEqual(text[1], '{"event": "oom", "message": '
                         '"CUDA out of memory. Tried to allocate 2.00 GiB"}')
        self.assertEqual(len(text), 3)
        ready = json.loads(text[2])
        self.assertEqual(ready["event"], "ready")
        self.assertGreaterEqual(ready["seconds"], 0)
        self.assertLess(ready["seconds"], 600)  # since this process started, not since boot

    def test_a_loss_that_is_not_a_finite_number_is_left_out(self):
        t = active_trial(self.tmp)
        t.report_step(1, 0.5, tokens=1, samples=1, loss=float("nan"))
        t.report_step(2, 0.5, tokens=1, samples=1, loss=float("inf"))
        for event in worker_sim.parse_metrics(t.metrics_file):
            self.assertNotIn("loss", event)

    def test_an_inactive_trial_writes_nothing(self):
        path = os.path.join(self.tmp, "metrics.jsonl")
        t = aa.Trial.standalone(seq_len=8, global_batch_size=2, measured_steps=3)
        t.metrics_file = path  # even with a path it stays silent
        t.report_step(1, 0.1, tokens=16, samples=2)
        t.report_oom("out of memory")
        t.report_model(10)
        t.report_ready()
        self.assertFalse(os.path.exists(path))


class CurrentTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        aa._current = None
        self.addCleanup(setattr, aa, "_current", None)

    def worker_env(self, doc):
        path = os.path.join(self.tmp, "strategy.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return {"AUTOACCEL_STRATEGY_FILE": path,
                "AUTOACCEL_METRICS_FILE": os.path.join(self.tmp, "metrics.jsonl"),
                "AUTOACCEL_WARMUP_STEPS": "2", "AUTOACCEL_MEASURED_STEPS": "5",
                "AUTOACCEL_TRIAL_DIR": self.tmp, "AUTOACCEL_DEVICE_TYPE": "cpu",
                "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}

    def test_standalone_without_the_worker_variables(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOACCEL_")}
        with mock.patch.dict(os.environ, env, clear=True):
            mine = aa.Trial.standalone(seq_len=32, global_batch_size=4, measured_steps=7)
            t = aa.current(standalone=mine)
        self.assertIs(t, mine)
        self.assertFalse(t.active)
        self.assertEqual(t.total_steps, 7)

    def test_reads_the_strategy_file_and_the_environment(self):
        doc = {"trial_id": "job-1-t0003", "attempt": 1, "rank": 1, "local_rank": 1,
               "world_size": 2, "seq_len": 64, "global_batch_size": 8, "warmup_steps": 9,
               "measured_steps": 9, "device_type": "cpu",
               "strategy": {"micro_batch_size": 2, "grad_accum_steps": 2, "precision": "bf16"},
               "strategy_text": "dp=2,mbs=2,ga=2", "format": "hf-trainer",
               "files": {"training_args.txt": "/x/training_args.txt"}, "model": None}
        with mock.patch.dict(os.environ, self.worker_env(doc)):
            t = aa.current()
            self.assertIs(aa.current(), t)  # one trial per process
        self.assertTrue(t.active)
        self.assertEqual((t.rank, t.local_rank, t.world_size), (1, 1, 2))
        self.assertEqual((t.seq_len, t.global_batch_size), (64, 8))
        # The worker's variables decide the step counts.
        self.assertEqual((t.warmup_steps, t.measured_steps, t.total_steps), (2, 5, 7))
        self.assertEqual(t.strategy["precision"], "bf16")
        self.assertEqual(t.files, {"training_args.txt": "/x/training_args.txt"})
        aa.report_step(1, 0.2, tokens=512, samples=8)
        self.assertEqual(len(worker_sim.parse_metrics(t.metrics_file)), 1)

    def test_an_unreadable_strategy_file_is_an_error_naming_it(self):
        with mock.patch.dict(os.environ, self.worker_env("{not json")):
            with self.assertRaisesRegex(aa.TrialError, "strategy.json"):
                aa.current()
        aa._current = None
        with mock.patch.dict(os.environ, self.worker_env({"rank": 0})):
            with self.assertRaisesRegex(aa.TrialError, "no \"strategy\" object"):
                aa.current()


class RunLoopTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def test_reports_warmup_plus_measured_steps_with_the_global_batch(self):
        t = active_trial(self.tmp, warmup=1, measured=2, global_batch=8, seq_len=16)
        calls = []
        times = aa.run_loop(lambda i: calls.append(i) or 3.5 - i, t)
        self.assertEqual(calls, [0, 1, 2])
        self.assertEqual(len(times), 3)
        events = worker_sim.parse_metrics(t.metrics_file)
        self.assertEqual(events[0]["event"], "ready")
        steps = [e for e in events if e["event"] == "step"]
        self.assertEqual([e["step"] for e in steps], [1, 2, 3])
        self.assertEqual({e["tokens"] for e in steps}, {8 * 16})
        self.assertEqual({e["samples"] for e in steps}, {8})
        self.assertEqual([e["loss"] for e in steps], [3.5, 2.5, 1.5])
        self.assertTrue(all(e["peak_memory_bytes"] > 0 for e in steps))

    def test_a_tensor_loss_is_reported_as_its_value(self):
        import torch
        t = active_trial(self.tmp, warmup=0, measured=1)
        aa.run_loop(lambda i: torch.tensor(2.25, requires_grad=True) * 2, t)
        self.assertEqual(worker_sim.parse_metrics(t.metrics_file)[-1]["loss"], 4.5)

    def test_out_of_memory_reports_oom_and_exits_1(self):
        import torch
        for error in (RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB"),
                      torch.OutOfMemoryError("CUDA out of memory (torch.OutOfMemoryError)"),
                      MemoryError()):
            t = active_trial(tempfile.mkdtemp())

            def step(i):
                if i == 1:
                    raise error
                return 1.0

            with mock.patch("traceback.print_exc"):
                with self.assertRaises(SystemExit) as exit_:
                    aa.run_loop(step, t)
            self.assertEqual(exit_.exception.code, 1)
            events = worker_sim.parse_metrics(t.metrics_file)
            self.assertEqual([e["event"] for e in events], ["ready", "step", "oom"])
            self.assertIn(type(error).__name__, events[-1]["message"])

    def test_other_errors_pass_through_without_an_oom_event(self):
        t = active_trial(self.tmp)
        with self.assertRaises(ValueError):
            aa.run_loop(lambda i: (_ for _ in ()).throw(ValueError("bad shape")), t)
        self.assertEqual([e["event"] for e in worker_sim.parse_metrics(t.metrics_file)],
                         ["ready"])

    def test_standalone_runs_its_steps_and_reports_nothing(self):
        t = aa.Trial.standalone(seq_len=4, global_batch_size=2, warmup_steps=1, measured_steps=2)
        calls = []
        aa.run_loop(calls.append, t)
        self.assertEqual(calls, [0, 1, 2])
        self.assertEqual(os.listdir(self.tmp), [])


class HfCallbackTest(unittest.TestCase):
    """AutoaccelCallback driven the way the Trainer drives it (transformers'
    TrainerState and TrainerControl; the Trainer itself runs in
    test_examples)."""

    def setUp(self):
        from transformers import TrainerControl, TrainerState
        self.tmp = tempfile.mkdtemp()
        self.state, self.control = TrainerState(), TrainerControl()
        self.args = mock.Mock(per_device_train_batch_size=2, gradient_accumulation_steps=3,
                              world_size=2)

    def step(self, callback, model=None, micro_batches=()):
        callback.on_step_begin(self.args, self.state, self.control)
        for kwargs in micro_batches:
            model(**kwargs)
        self.state.global_step += 1
        callback.on_step_end(self.args, self.state, self.control)

    def test_stops_training_after_warmup_plus_measured_steps(self):
        from autoaccel.hf import AutoaccelCallback
        t = active_trial(self.tmp, warmup=1, measured=2, global_batch=8, seq_len=16)
        callback = AutoaccelCallback(t)
        callback.on_train_begin(self.args, self.state, self.control)
        for _ in range(2):
            self.step(callback)
            self.assertFalse(self.control.should_training_stop)
        self.step(callback)
        self.assertTrue(self.control.should_training_stop)
        events = worker_sim.parse_metrics(t.metrics_file)
        self.assertEqual([e["event"] for e in events], ["ready", "step", "step", "step"])
        self.assertEqual({e["tokens"] for e in events[1:]}, {8 * 16})

    def test_reports_the_ranks_mean_token_loss_over_micro_batches(self):
        import torch
        from autoaccel.hf import AutoaccelCallback

        class Model(torch.nn.Module):  # returns sum of token losses / num_items, like HF
            def forward(self, labels, num_items_in_batch, token_loss):
                tokens = labels[..., 1:].ne(-100).sum()
                return {"loss": token_loss * tokens / num_items_in_batch}

        t = active_trial(self.tmp, warmup=0, measured=1, global_batch=2, seq_len=5)
        model = Model()
        callback = AutoaccelCallback(t)
        callback.on_train_begin(self.args, self.state, self.control, model=model)
        labels = torch.zeros(1, 5, dtype=torch.long)
        masked = torch.tensor([[0, 0, -100, -100, -100]])  # 1 label token after the shift
        # 4 tokens at loss 2.0 and 1 token at loss 7.0, over 10 items of all ranks.
        self.step(callback, model, [
            {"labels": labels, "num_items_in_batch": 10, "token_loss": 2.0},
            {"labels": masked, "num_items_in_batch": 10, "token_loss": 7.0}])
        step = worker_sim.parse_metrics(t.metrics_file)[-1]
        self.assertAlmostEqual(step["loss"], (4 * 2.0 + 7.0) / 5)

    def test_standalone_reports_nothing_and_stops_nothing(self):
        from autoaccel.hf import AutoaccelCallback
        callback = AutoaccelCallback(aa.Trial.standalone(seq_len=16), seq_len=16)
        callback.on_train_begin(self.args, self.state, self.control)
        for _ in range(3):
            self.step(callback)
        self.assertFalse(self.control.should_training_stop)
        self.assertEqual(os.listdir(self.tmp), [])


if __name__ == "__main__":
    unittest.main()
