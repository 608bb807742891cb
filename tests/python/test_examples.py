"""The examples, launched through deploy/examples/launchers.json as the worker
launches them (worker_sim): each rank reports warm-up + measured steps of the
whole global batch and stops by itself; settings an example cannot run exit
with the reason and no steps. 1 warm-up + 2 measured steps of tiny models, on
CPU with gloo; needs the CLI (AUTOACCEL_CLI) for the export."""

import os
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import worker_sim  # noqa: E402

SEQ_LEN = 32


def steps(result):
    return [e for e in result["events"] if e["event"] == "step"]


@unittest.skipUnless(worker_sim.autoaccel_cli(), "AUTOACCEL_CLI (the autoaccel binary) not set")
class ExamplesTest(unittest.TestCase):
    def assert_trained(self, results, global_batch, stderr_says=()):
        for r in results:
            where = "rank argv %s\nstderr:\n%s" % (r["argv"], r["stderr"][-3000:])
            self.assertEqual(r["returncode"], 0, where)
            self.assertEqual([e["step"] for e in steps(r)], [1, 2, 3], where)
            for e in steps(r):
                self.assertEqual(e["tokens"], global_batch * SEQ_LEN)
                self.assertEqual(e["samples"], global_batch)
                self.assertGreater(e["peak_memory_bytes"], 0)
                self.assertIn("loss", e)
            kinds = [e["event"] for e in r["events"]]
            self.assertLess(kinds.index("ready"), kinds.index("step"))
            self.assertIn("model", kinds)
            for text in stderr_says:
                self.assertIn(text, r["stderr"])

    def test_hf_trainer_one_rank(self):
        results = worker_sim.run_launcher(
            "hf-llama-tiny", "mbs=2,ga=2,precision=bf16,checkpoint=full,attention=sdpa,"
            "optimizer=fused_adamw", world_size=1, global_batch=4, seq_len=SEQ_LEN)
        # The Trainer applied the exported flags (its own summary line).
        self.assert_trained(results, 4, ["mixed precision bf16", "optim adamw_torch_fused",
                                         "activation checkpointing True"])

    # Two ranks under DDP: tests/launcher_e2e_test.cc, through a real worker.

    def test_hf_trainer_refuses_fsdp_on_cpu_instead_of_training_ddp(self):
        results = worker_sim.run_launcher(
            "hf-llama-tiny", "dp=2,sharding=fsdp,mbs=1,ga=1,precision=bf16", world_size=2,
            global_batch=2, seq_len=SEQ_LEN)
        for r in results:
            self.assertEqual(r["returncode"], 2, r["stderr"][-2000:])
            self.assertIn("sharding fsdp: the Trainer did not enable FSDP", r["stderr"])
            self.assertEqual(steps(r), [])

    def test_torch_fsdp_two_ranks_fully_shard(self):
        results = worker_sim.run_launcher(
            "torch-fsdp-tiny", "dp=2,sharding=fsdp,mbs=1,ga=2,precision=bf16,"
            "checkpoint=selective,attention=math,optimizer=fused_adamw", world_size=2,
            global_batch=4, seq_len=SEQ_LEN)
        # What autoaccel.torch applied (its own summary, on stderr).
        self.assert_trained(results, 4, [
            "sharding fsdp: FSDP2 fully_shard on 2 blocks and the root",
            "precision bf16: autocast bfloat16", "checkpointing selective: 2 of 2 blocks",
            "attention math: attn_implementation 'eager'", "AdamW(fused=True)"])

    def test_torch_fsdp_two_ranks_tensor_parallel_with_the_models_plan(self):
        results = worker_sim.run_launcher(
            "torch-fsdp-tiny", "dp=1,tp=2,pp=1,mbs=1,ga=2,precision=pure_bf16,attention=sdpa",
            world_size=2, global_batch=2, seq_len=SEQ_LEN)
        self.assert_trained(results, 2, [
            "tensor_parallel 2: parallelize_module with LlamaForCausalLM's plan",
            "precision pure_bf16: parameters in bfloat16, fp32 master copies"])

    def test_torch_fsdp_refuses_pipeline_parallel(self):
        results = worker_sim.run_launcher(
            "torch-fsdp-tiny", "dp=1,tp=1,pp=2,mbs=1,ga=2", world_size=2, global_batch=2,
            seq_len=SEQ_LEN)
        for r in results:
            self.assertEqual(r["returncode"], 2, r["stderr"][-2000:])
            self.assertIn("strategy.pipeline_parallel=2: autoaccel.torch runs no pipeline",
                          r["stderr"])
            self.assertEqual(steps(r), [])

    def test_docs_minimal_script_speaks_the_protocol_with_json_alone(self):
        with open(os.path.join(worker_sim.ROOT, "docs", "LAUNCHERS.md"), encoding="utf-8") as f:
            doc = f.read()
        block = re.search(r"<!-- minimal-script:[^>]*-->\n```python\n(.*?)```", doc, re.S)
        self.assertIsNotNone(block, "docs/LAUNCHERS.md lost its minimal script")
        script = os.path.join(tempfile.mkdtemp(), "minimal.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(block.group(1))
        self.assertNotIn("autoaccel", block.group(1))
        results = worker_sim.run_launcher(
            {"argv": ["{python}", script], "dimensions": ["micro_batch_size", "optimizer"]},
            "mbs=2,ga=2,optimizer=fused_adamw", world_size=1, global_batch=4, seq_len=SEQ_LEN)
        r = results[0]
        self.assertEqual(r["returncode"], 0, r["stderr"])
        self.assertEqual([e["step"] for e in steps(r)], [1, 2, 3])
        self.assertEqual({e["tokens"] for e in steps(r)}, {4 * SEQ_LEN})


if __name__ == "__main__":
    unittest.main()
