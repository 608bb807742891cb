"""autoaccel.strategy and autoaccel.torch.

- Every form of a strategy reads into the same dict, and the Python field
  table is the C++ one (spec/strategy_fields.h, spec/strategy.h).
- apply() refuses what it cannot apply, naming the key, before it changes
  anything; it applies checkpointing and attention to a model of the user's.
- With AUTOACCEL_TRIAL_BIN (autoaccel-trial): the engine's GPT-2 trial and
  autoaccel.torch.apply of the same strategy on transformers' GPT2LMHeadModel,
  with the engine's initial weights and data (engine_gpt2.py), give the same
  loss at every step, within LOSS_TOL (fp32) or LOSS_TOL_LOW (bf16, fp16).
  Two-rank strategies run under torchrun (gloo, CPU) against two engine ranks.
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import unittest
import unittest.mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from autoaccel import strategy as aas  # noqa: E402
from autoaccel import trial as aa  # noqa: E402

try:
    import torch
    import torch.nn as nn
    import transformers
    import autoaccel.torch as aat
except ImportError:  # the strategy tests need neither
    torch = None

TRIAL_BIN = os.environ.get("AUTOACCEL_TRIAL_BIN", "")
GPT2_TINY = os.path.join(ROOT, "deploy", "examples", "gpt2-tiny.json")

# Largest |engine - autoaccel.torch| of any step's loss (the loss is ~4.2, the
# mean cross-entropy over the global batch). fp32: the same weights, data and
# update, summed in another order (transformers' Conv1D is addmm, the
# engine's nn.Linear; its eager attention softmaxes in the input dtype):
# measured <= 2.4e-7. bf16, pure_bf16, fp16: those orders round to 8 (fp16:
# 11) mantissa bits per op, and the rounding differences grow with the steps:
# measured <= 3e-4 over 10 steps; 1e-3 is 0.025 % of the loss. Dropping
# pure_bf16's fp32 master copies moves it by 4e-3 by step 8 (the negative
# control below), so the tolerance tells the semantics apart.
LOSS_TOL = 1e-5
LOSS_TOL_LOW = 1e-3
STEPS = (2, 8)  # warm-up, measured
SEQ_LEN = 16

# (strategy text, what it pins). Global batch = mbs x ga x dp.
ENGINE_CASES = [
    ("mbs=2,ga=2,precision=fp32,checkpoint=none,attention=math,optimizer=adamw,offload=none",
     "micro-batches with gradient accumulation"),
    ("mbs=1,ga=4,precision=bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=none",
     "bf16 autocast, SDPA"),
    ("mbs=2,ga=2,precision=pure_bf16,checkpoint=full,attention=math,optimizer=fused_adamw,"
     "offload=none", "pure bf16 with fp32 masters, full checkpointing, fused AdamW"),
    ("mbs=4,ga=1,precision=fp32,checkpoint=full,ckpt_pct=50,attention=sdpa,optimizer=adamw,"
     "offload=none", "50 % checkpointing"),
    ("mbs=2,ga=2,precision=fp16,checkpoint=selective,ckpt_pct=50,attention=math,"
     "optimizer=adamw,offload=cpu", "fp16 with GradScaler, selective checkpointing, offload"),
    ("dp=2,tp=1,pp=1,sharding=none,mbs=1,ga=2,precision=fp32,checkpoint=none,attention=math,"
     "optimizer=adamw,offload=none", "DDP"),
    ("dp=2,tp=1,pp=1,sharding=zero1,mbs=2,ga=1,precision=bf16,checkpoint=none,attention=sdpa,"
     "optimizer=fused_adamw,offload=none", "ZeroRedundancyOptimizer"),
    ("dp=2,tp=1,pp=1,sharding=zero2,mbs=1,ga=2,precision=fp32,checkpoint=full,attention=math,"
     "optimizer=adamw,offload=none", "FSDP2 without resharding after forward"),
    ("dp=2,tp=1,pp=1,sharding=fsdp,mbs=2,ga=1,precision=bf16,checkpoint=full,ckpt_pct=50,"
     "attention=sdpa,optimizer=adamw,offload=none", "FSDP2, bf16, 50 % checkpointing"),
    ("dp=2,tp=1,pp=1,sharding=fsdp,mbs=1,ga=2,precision=pure_bf16,checkpoint=none,"
     "attention=math,optimizer=fused_adamw,offload=none", "FSDP2 with pure bf16"),
]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra):
    env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join(p for p in (os.path.join(ROOT, "python"), HERE,
                                                      os.environ.get("PYTHONPATH")) if p))
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT", "AUTOACCEL_STRATEGY_FILE"):
        env.pop(key, None)
    env.update(extra)
    return env


def trial_spec(text):
    """The TrialSpec (trial_contract/trial_spec.h) of `text` on gpt2-tiny."""
    s = aas.parse(text)
    with open(GPT2_TINY, encoding="utf-8") as f:
        config = json.load(f)
    return {"model_family": "gpt2", "model_config": config, "seq_len": SEQ_LEN,
            "global_batch_size": s["micro_batch_size"] * s["grad_accum_steps"] *
            s["data_parallel"], "strategy": s, "warmup_steps": STEPS[0],
            "measured_steps": STEPS[1], "seed": 1234, "world_size": s["data_parallel"],
            "num_threads": 1}


def run_engine(spec, work):
    """Every rank of the engine's trial; rank 0's step losses."""
    port, procs = _free_port(), []
    for rank in range(spec["world_size"]):
        path = os.path.join(work, "engine-spec-%d.json" % rank)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(dict(spec, rank=rank, local_rank=rank, master_port=port), f)
        procs.append(subprocess.Popen(
            [TRIAL_BIN, "--spec", path, "--result", os.path.join(work, "engine-%d.json" % rank)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    errors = [p.communicate(timeout=300)[1] for p in procs]
    with open(os.path.join(work, "engine-0.json"), encoding="utf-8") as f:
        result = json.load(f)
    assert result["status"] == "SUCCEEDED", (result, errors)
    return result["step_losses"]


def run_torch(spec, work, extra_args=()):
    """engine_gpt2.py: one process, or torchrun's world of data_parallel
    ranks; its step losses and what apply() reported."""
    path, out = os.path.join(work, "torch-spec.json"), os.path.join(work, "torch.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    script = [os.path.join(HERE, "engine_gpt2.py"), *extra_args, path, out]
    if spec["world_size"] > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
               "--nproc-per-node=%d" % spec["world_size"], "--master-addr=127.0.0.1",
               "--master-port=%d" % _free_port(), *script]
    else:
        cmd = [sys.executable, *script]
    run = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, "%s: exit %d\n%s" % (" ".join(cmd), run.returncode,
                                                      run.stderr[-4000:])
    with open(out, encoding="utf-8") as f:
        return json.load(f)


class StrategyFormsTest(unittest.TestCase):
    TEXT = ("dp=2,tp=1,pp=1,sharding=zero2,mbs=4,ga=2,precision=bf16,checkpoint=full,"
            "ckpt_pct=50,attention=sdpa,optimizer=fused_adamw,offload=none")

    def test_every_form_reads_into_the_same_dict(self):
        s = aas.parse(self.TEXT)
        self.assertEqual(s["sharding"], "zero2")
        self.assertEqual(s["checkpoint_percent"], 50)
        self.assertEqual(set(s), {f.name for f in aas.FIELDS})
        tmp = tempfile.mkdtemp()
        bare, launcher = os.path.join(tmp, "bare.json"), os.path.join(tmp, "strategy.json")
        with open(bare, "w", encoding="utf-8") as f:
            json.dump(s, f)
        with open(launcher, "w", encoding="utf-8") as f:
            json.dump({"trial_id": "t", "world_size": 2, "strategy": s}, f)
        trial = aa.Trial.standalone(strategy=s)

        class Answer:  # autoaccel.results.StrategyAnswer's shape
            strategy_json = s

        for form in (dict(s), bare, launcher, trial, Answer()):
            self.assertEqual(aas.parse(form), s, form)
        self.assertEqual(aas.to_text(s), self.TEXT)

    def test_the_single_rank_text_leaves_the_layout_out_and_missing_keys_are_defaults(self):
        s = aas.parse({"micro_batch_size": 2})
        self.assertEqual(s["precision"], "fp32")
        self.assertEqual(aas.to_text(s), "mbs=2,ga=1,precision=fp32,checkpoint=none,"
                         "attention=math,optimizer=adamw,offload=none")

    def test_malformed_strategies_name_the_key(self):
        for bad, says in [
            ({"micro_batch_sizes": 2}, "unknown key 'micro_batch_sizes'"),
            ({"precision": "bf32"}, "strategy.precision: unknown value 'bf32'"),
            ({"micro_batch_size": 0}, "strategy.micro_batch_size: expected a positive integer"),
            ({"micro_batch_size": True}, "strategy.micro_batch_size"),
            ({"sequence_parallel": 1}, "strategy.sequence_parallel: expected true or false"),
            ({"sharding": "zero2"}, "strategy.sharding: zero2 shards model state"),
            ({"checkpoint_percent": 50}, "strategy.checkpoint_percent: must be 100"),
            ("mbs=2,gaa=1", "unknown key 'gaa'"),
            ("mbs=2,ckpt_pct=101,checkpoint=full", "strategy.ckpt_pct: must be 1..100"),
            ("dp=1,tp=1,pp=1,sharding=none,sp=1,mbs=1", "strategy.sp: splits activations"),
            ("mbs=1,pp_schedule=interleaved", "strategy.pp_schedule: interleaved needs pp > 1"),
        ]:
            with self.assertRaises(ValueError, msg=bad) as e:
                aas.parse(bad)
            self.assertIn(says, str(e.exception))

    def test_the_field_table_is_the_cpp_one(self):
        with open(os.path.join(ROOT, "spec", "strategy_fields.h"), encoding="utf-8") as f:
            fields_h = f.read()
        with open(os.path.join(ROOT, "spec", "strategy.h"), encoding="utf-8") as f:
            strategy_h = f.read()
        rows = re.findall(r'StrategyField<(\w+)>\{\s*"(\w+)",\s*"(\w+)"', fields_h)
        self.assertEqual([(name, key) for _, name, key in rows],
                         [(f.name, f.text_key) for f in aas.FIELDS])
        pairs = re.findall(r'\{((\w+)::\w+), "(\w+)"\}', fields_h)
        names = {}  # enum -> its names in declaration order
        for _, enum, name in pairs:
            names.setdefault(enum, []).append(name)
        enumerator_name = {enumerator: name for enumerator, _, name in pairs}
        struct = re.search(r"struct Strategy \{(.*?)\n\};", strategy_h, re.S).group(1)
        struct = re.sub(r"//[^\n]*", "", struct)
        defaults = dict(re.findall(r"\b(\w+) = ([^;\n]+);", struct))
        for (kind, name, _), f in zip(rows, aas.FIELDS):
            default = defaults[name].strip()
            if kind == "int":
                self.assertEqual((f.kind, f.default), ("count", int(default)), name)
            elif kind == "bool":
                self.assertEqual((f.kind, f.default), ("flag", default == "true"), name)
            else:
                self.assertEqual((f.kind, f.choices, f.default),
                                 ("choice", tuple(names[kind]), enumerator_name[default]), name)


@unittest.skipIf(torch is None, "torch and transformers are not installed")
class RefusalTest(unittest.TestCase):
    """What cannot be applied is refused with the key and the reason, before
    the model or the process group is touched."""

    def gpt2(self):
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_embd=32, n_head=4, vocab_size=64, n_positions=32, bos_token_id=None,
            eos_token_id=None))

    def assert_refused(self, strategy, model, says, optimizer_fn=None, **kwargs):
        before = {k: v.clone() for k, v in model.state_dict().items()}
        attention = getattr(model.config, "_attn_implementation", None) \
            if hasattr(model, "config") else None
        with self.assertRaises(aat.UnsupportedStrategy) as e:
            aat.apply(strategy, model, optimizer_fn or {"lr": 1e-3}, device="cpu", **kwargs)
        for text in says:
            self.assertIn(text, str(e.exception))
        self.assertIsInstance(e.exception, ValueError)
        after = model.state_dict()
        self.assertEqual(set(before), set(after))
        for k in before:
            self.assertTrue(torch.equal(before[k], after[k]), k)
            self.assertEqual(before[k].dtype, after[k].dtype, k)
        if attention is not None:
            self.assertEqual(model.config._attn_implementation, attention)

    def test_pipeline_and_sequence_parallelism(self):
        self.assert_refused("dp=1,tp=1,pp=2,sharding=none,mbs=1,ga=4", self.gpt2(),
                            ["strategy.pipeline_parallel=2"])
        self.assert_refused("dp=1,tp=2,pp=1,sharding=none,sp=1,mbs=1,ga=1", self.gpt2(),
                            ["strategy.sequence_parallel"])
        self.assert_refused("dp=1,tp=1,pp=1,sharding=none,cp=2,mbs=1,ga=1", self.gpt2(),
                            ["strategy.context_parallel=2"])
        self.assert_refused("mbs=1,ga=1,precision=fp8", self.gpt2(),
                            ["strategy.precision=fp8", "no fp8 linear layers"])

    def test_tensor_parallel_needs_a_declared_plan(self):
        self.assert_refused("dp=1,tp=2,pp=1,sharding=none,mbs=1,ga=1", self.gpt2(),
                            ["GPT2LMHeadModel declares no tensor-parallel plan"])
        qwen3 = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, vocab_size=64, max_position_embeddings=32))
        self.assert_refused("dp=1,tp=2,pp=1,sharding=none,mbs=1,ga=1", qwen3,
                            ["Qwen3ForCausalLM's plan shards", "replicated_with_grad_allreduce"])
        llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=64, max_position_embeddings=32))
        self.assert_refused("dp=2,tp=2,pp=1,sharding=zero1,mbs=1,ga=1", llama,
                            ["strategy.sharding=zero1 with tensor_parallel=2", "zero2 or fsdp"])

    def test_a_strategy_for_another_number_of_ranks_is_refused(self):
        with unittest.mock.patch.dict(os.environ, {"WORLD_SIZE": "2"}):
            with self.assertRaises(ValueError) as e:
                aat.apply("mbs=1", self.gpt2(), {"lr": 1e-3}, device="cpu")
        self.assertIn("runs on one rank, but 2 were started", str(e.exception))

    def test_an_optimizer_that_drops_fused_is_refused(self):
        self.assert_refused("mbs=1,precision=pure_bf16,optimizer=fused_adamw", self.gpt2(),
                            ["strategy.optimizer=fused_adamw", "fused=None"],
                            optimizer_fn=lambda params, fused: torch.optim.AdamW(params))

    def test_a_model_of_ones_own_needs_its_attention_hook_and_blocks(self):
        self.assert_refused("mbs=1,attention=sdpa", nn.Linear(4, 4), ["set_attention"])
        self.assert_refused("mbs=1,checkpoint=full", nn.Linear(4, 4),
                            ["strategy.checkpointing: full needs the model's repeated layers",
                             "blocks="], set_attention=lambda m, a: None)
        self.assert_refused("mbs=1,checkpoint=selective", Toy(), ["Toy is not a Hugging Face"],
                            set_attention=Toy.set_attention)


class Toy(nn.Module if torch is not None else object):
    """A model of the user's own: blocks in a ModuleList, an attention switch."""

    def __init__(self, blocks=4):
        super().__init__()
        self.embed = nn.Embedding(32, 16)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 16), nn.GELU())
                                    for _ in range(blocks))
        self.head = nn.Linear(16, 32)
        self.attention = None

    @staticmethod
    def set_attention(model, name):
        model.attention = name

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


@unittest.skipIf(torch is None, "torch and transformers are not installed")
class OwnModelTest(unittest.TestCase):
    def test_checkpointing_recomputes_the_first_half_of_the_blocks_and_keeps_the_loss(self):
        losses = {}
        for text in ("mbs=2,ga=2,checkpoint=none", "mbs=2,ga=2,checkpoint=full,ckpt_pct=50"):
            torch.manual_seed(0)
            toy = Toy()
            calls = [0] * len(toy.blocks)
            for i, block in enumerate(toy.blocks):
                # On a module inside the block: a recomputation calls the
                # block's forward, not the block.
                block[1].register_forward_hook(
                    lambda *_, i=i: calls.__setitem__(i, calls[i] + 1))
            applied = aat.apply(text, toy, torch.optim.AdamW, set_attention=Toy.set_attention,
                                device="cpu")
            model, optimizer, step = applied
            self.assertEqual(toy.attention, "math")
            batch = torch.randint(0, 32, (4, 9), generator=torch.Generator().manual_seed(1))
            losses[text] = [step(batch).item() for _ in range(3)]
            recomputed = [c - 6 for c in calls]  # 3 steps x 2 micro-batches forward
            if "full" in text:
                self.assertEqual(recomputed, [6, 6, 0, 0])  # again in every backward
                self.assertIn("checkpointing full: 2 of 4 blocks (50%)", applied.applied)
            else:
                self.assertEqual(recomputed, [0, 0, 0, 0])
        a, b = losses.values()
        self.assertEqual(a, b)
        self.assertLess(a[-1], a[0])

    def test_a_batch_of_the_wrong_size_is_refused(self):
        _, _, step = aat.apply("mbs=2,ga=2", Toy(), torch.optim.AdamW,
                               set_attention=Toy.set_attention, device="cpu")
        with self.assertRaises(ValueError) as e:
            step(torch.zeros(3, 9, dtype=torch.long))
        self.assertIn("micro_batch_size 2 x grad_accum_steps 2 = 4", str(e.exception))


@unittest.skipIf(torch is None, "torch and transformers are not installed")
class TensorParallelTest(unittest.TestCase):
    """Tensor parallelism with the plan a transformers Llama declares follows
    the same model trained on one rank (apply_llama.py)."""

    CASES = [  # (layout, one-rank reference, tied embeddings, tolerance)
        ("dp=1,tp=2,pp=1,sharding=none,mbs=2,ga=1,precision=fp32,attention=sdpa,"
         "optimizer=fused_adamw", "mbs=2,ga=1,precision=fp32,attention=sdpa,"
         "optimizer=fused_adamw", "untied", LOSS_TOL),
        ("dp=1,tp=2,pp=1,sharding=none,mbs=1,ga=2,precision=pure_bf16,checkpoint=full,"
         "attention=math", "mbs=1,ga=2,precision=pure_bf16,checkpoint=full,attention=math",
         "tied", LOSS_TOL_LOW),
        ("dp=2,tp=2,pp=1,sharding=fsdp,mbs=2,ga=1,precision=fp32,attention=math,"
         "optimizer=adamw", "mbs=2,ga=2,precision=fp32,attention=math,optimizer=adamw",
         "untied", LOSS_TOL),
    ]

    def run_llama(self, text, tied):
        out = os.path.join(tempfile.mkdtemp(prefix="aa-torch-tp-"), "out.json")
        s = aas.parse(text)
        world = s["data_parallel"] * s["tensor_parallel"]
        script = [os.path.join(HERE, "apply_llama.py"), text, tied, out]
        cmd = [sys.executable, *script] if world == 1 else [
            sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
            "--nproc-per-node=%d" % world, "--master-addr=127.0.0.1",
            "--master-port=%d" % _free_port(), *script]
        run = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr[-4000:])
        with open(out, encoding="utf-8") as f:
            return json.load(f)

    def test_tensor_parallel_follows_one_rank(self):
        for layout, reference, tied, tol in self.CASES:
            with self.subTest(layout, tied=tied):
                ours = self.run_llama(layout, tied)
                one = self.run_llama(reference, tied)["step_losses"]
                diff = max(abs(a - b) for a, b in zip(one, ours["step_losses"]))
                print("\n  %-60s max |one rank - tp| = %.2e (tolerance %.0e)"
                      % (layout.split(",mbs")[0] + ", " + tied, diff, tol), file=sys.stderr)
                self.assertLessEqual(diff, tol, "%s\none rank %s\nours %s" % (
                    layout, one, ours["step_losses"]))
                self.assertTrue(any("parallelize_module with LlamaForCausalLM's plan" in line
                                    for line in ours["applied"]), ours["applied"])


@unittest.skipUnless(TRIAL_BIN and torch is not None,
                     "AUTOACCEL_TRIAL_BIN (autoaccel-trial) not set, or no torch/transformers")
class EngineTrajectoryTest(unittest.TestCase):
    """autoaccel.torch reaches the engine's loss at every step."""

    def compare(self, text, what, extra_args=()):
        spec = trial_spec(text)
        work = tempfile.mkdtemp(prefix="aa-torch-apply-")
        engine = run_engine(spec, work)
        ours = run_torch(spec, work, extra_args)
        self.assertEqual(len(engine), sum(STEPS))
        self.assertEqual(len(ours["step_losses"]), len(engine))
        diff = max(abs(a - b) for a, b in zip(engine, ours["step_losses"]))
        tol = LOSS_TOL if spec["strategy"]["precision"] == "fp32" else LOSS_TOL_LOW
        print("\n  %-60s max |engine - torch| = %.2e (tolerance %.0e)" % (what, diff, tol),
              file=sys.stderr)
        return engine, ours, diff, tol

    def test_every_case_follows_the_engine(self):
        for text, what in ENGINE_CASES:
            with self.subTest(what, strategy=text):
                engine, ours, diff, tol = self.compare(text, what)
                self.assertLessEqual(diff, tol, "%s\nengine %s\ntorch  %s\napplied %s"
                                     % (text, engine, ours["step_losses"], ours["applied"]))
                self.assertLess(engine[-1], engine[0] - 0.2)  # it learns: a trajectory, not noise

    def test_pure_bf16_without_master_copies_is_told_apart(self):
        _, _, diff, tol = self.compare(ENGINE_CASES[2][0], "pure bf16 WITHOUT master copies",
                                       ["--without-master-copies"])
        self.assertGreater(diff, tol)


if __name__ == "__main__":
    unittest.main()
