"""torchtitan's own entry point (`-m torchtitan.train`) on CPU ranks, with a
probe: run_export.py runs the torchtitan export's command with this file in
place of `-m torchtitan.train`, which it runs unchanged (main(Trainer)) after
two stand-ins for this machine's missing GPUs:
  - torchtitan 0.2.2 takes "cuda" for its device when no accelerator is
    present (tools/utils.py), so torch's device lookup answers "cpu", with the
    memory queries torchtitan's metrics make of a GPU answered by a module
    that has them;
  - torchtitan hands FSDP2 a gradient divide factor of 1 (it normalizes the
    loss by the global token count itself), which FSDP2 turns into NCCL's
    pre-multiplied sum by 1/1; gloo has no such reduction, so a sum (the same
    thing) is used for it;
  - torchtitan's MoE router counts the tokens per expert with torch.histc
    of the chosen experts' int64 indices (models/moe/moe.py
    TokenChoiceTopKRouter and TokenReorderer), which torch 2.11 computes on
    CUDA but not on CPU ("histogram_cpu" not implemented for 'Long'): the
    same count of the indices as floats (exact below 2**24), cast back,
    stands in;
  - torchtitan's MoE orders each rank's routed tokens by expert
    (models/moe/utils.py _permute, under expert parallelism and before
    torch._grouped_mm) with a Triton kernel (moe/kernels.py
    fill_indices_wrapper), which has no CPU backend: it fails with "0 active
    drivers ([]). There should only be one." torchtitan's own CPU version of
    it (generate_permute_indices(..., use_cpu=True)) stands in. The rest of
    MoE and expert parallelism runs on CPU ranks as it is: the all-to-alls
    over gloo, torch._grouped_mm (torch 2.11 has a CPU kernel) and the
    for-loop experts.
The probe (probe.py's Probe, on torchtitan's model) records what each rank
really ran and writes $AUTOACCEL_PROBE_DIR/rankN.json."""

import os
import sys
import types

import torch
import torch._utils
import torch.distributed as dist
from torch.distributed.tensor import DTensor

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from probe import Probe  # noqa: E402


class CpuDevice(types.ModuleType):
    """torch.cpu, plus what torchtitan asks of a GPU's device module."""

    def __getattr__(self, name):
        return getattr(torch.cpu, name)

    def get_device_name(self, device=None):
        return "cpu"

    def get_device_properties(self, device=None):
        return types.SimpleNamespace(total_memory=1 << 34, name="cpu")

    def memory_stats(self, device=None):
        return {"active_bytes.all.peak": 0, "reserved_bytes.all.peak": 0,
                "num_alloc_retries": 0, "num_ooms": 0}

    def reset_peak_memory_stats(self, device=None):
        pass

    def empty_cache(self):
        pass

    def current_device(self):
        return 0


_cpu = CpuDevice("cpu_device")
torch._utils._get_available_device_type = lambda: "cpu"
torch._utils._get_device_module = lambda device_type=None: _cpu
_premul_sum = dist._make_nccl_premul_sum
dist._make_nccl_premul_sum = lambda factor: (
    dist.ReduceOp.SUM if factor == 1 else _premul_sum(factor))

_histc = torch.histc


def histc(input, bins=100, min=0, max=0, *, out=None):  # noqa: A002 - torch's names
    if input.is_floating_point() or out is not None:
        return _histc(input, bins, min, max, out=out)
    return _histc(input.float(), bins, min, max).to(input.dtype)


torch.histc = histc

import torchtitan.models.moe.utils as moe_utils  # noqa: E402
from torchtitan.models.moe.kernels import generate_permute_indices  # noqa: E402

moe_utils.generate_permute_indices = (
    lambda *args, **kwargs: generate_permute_indices(*args, **kwargs, use_cpu=True))

from torchtitan.train import Trainer, main  # noqa: E402


class ProbedTrainer(Trainer):
    """torchtitan's Trainer, watched by a Probe."""

    def __init__(self, job_config):
        super().__init__(job_config)
        self.probe = Probe()
        parts = self.model_parts
        dims = self.parallel_dims
        # DTensors count their global size; pipeline stages add up.
        parameters = torch.tensor(sum(p.numel() for m in parts for p in m.parameters()))
        if dims.pp_enabled:
            dist.all_reduce(parameters, group=dims.get_mesh("pp").get_group())
        embeddings = [m.tok_embeddings for m in parts if getattr(m, "tok_embeddings", None)]
        layers = [block for m in parts for block in m.layers.values()]
        # A layer's MLP: its dense feed_forward, or its mixture of experts.
        moes = [inner(b).moe for b in layers if getattr(inner(b), "moe_enabled", False)]
        self.probe.watch_parts(embeddings[0] if embeddings else None,
                               [getattr(inner(b), "moe", None) or inner(b).feed_forward
                                for b in layers], int(parameters))
        # Expert parallelism as it ran: how many experts each rank's experts
        # module computed (the tokens per expert it was handed, after the
        # dispatch all-to-all), and how the experts' weights are laid out
        # over torchtitan's device mesh.
        self.local_experts = set()
        for moe in moes:
            moe.experts.register_forward_pre_hook(
                lambda module, args: self.local_experts.add(int(args[1].shape[0])))
        w1 = moes[0].experts.w1 if moes else None
        self.expert_layout = (
            {name: str(p) for name, p in zip(w1.device_mesh.mesh_dim_names, w1.placements)}
            if isinstance(w1, DTensor) else None)
        self.experts = moes[0].experts.num_experts if moes else 0
        self.probe.count_steps(self.optimizers.optimizers[0])
        attention = {type(inner(b).attention.inner_attention).__name__ for b in layers}
        self.probe.attn_implementation = (
            "sdpa" if attention == {"ScaledDotProductAttentionWrapper"} else sorted(attention))
        self.probed_parts = parts

    def close(self):
        if getattr(self, "probe", None) is not None:
            parts = self.probed_parts
            from torch.distributed._composable.replicate import replicate
            self.probe.report(
                self.optimizers.optimizers[0], self.probe.optimizer_steps,
                fsdp=any(type(m).__name__.startswith("FSDP") for m in parts),
                fsdp_version=2,
                ddp=any(replicate.state(m) is not None
                        and getattr(replicate.state(m), "_ddp", None) is not None
                        for m in parts),
                tp=self.parallel_dims.tp_enabled,
                pp=self.parallel_dims.pp_enabled,
                gradient_accumulation=self.gradient_accumulation_steps,
                experts=self.experts, local_experts=sorted(self.local_experts),
                expert_layout=self.expert_layout,
                expert_parallel=self.parallel_dims.ep)
            self.probe = None
        super().close()


def inner(block):
    """A transformer block under torchtitan's checkpoint wrapper."""
    return getattr(block, "_checkpoint_wrapped_module", block)


if __name__ == "__main__":
    main(ProbedTrainer)
