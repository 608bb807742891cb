"""The flagai export, read by FlagAI 1.8.4 itself: flagai_trainer.json's keys
bind to flagai.trainer.Trainer's signature with the user's lr and
weight_decay (an unknown key is a TypeError), its env_type is one the
Trainer accepts, its batch and accumulation are the strategy's; the
ds_config.json of the DeepSpeed env types is accepted by DeepSpeed's own
config class (.venv's deepspeed, seen through the layer) with the
data-parallel size the Trainer gives it. The Trainer is not constructed: for
any env_type but pytorch it parses argv and relaunches the script. Run with
.venv-flagai's python."""

import inspect
import json
import os

from exports import main

# flagai/trainer.py: Trainer.__init__ raises "Not supported env_type!!!!" for others.
ENV_TYPES = {"deepspeed", "pytorch", "pytorchDDP", "deepspeed+mpu", "bmtrain"}


class ModelParallel:
    """DeepSpeed's view of flagai.mpu: data-parallel = world / model-parallel."""

    def __init__(self, dp, tp):
        self.dp, self.tp = dp, tp

    def get_data_parallel_world_size(self):
        return self.dp

    def get_model_parallel_world_size(self):
        return self.tp


def check(strategy, doc, out):
    from flagai.trainer import Trainer

    with open(os.path.join(out, "flagai_trainer.json")) as f:
        kwargs = json.load(f)
    inspect.signature(Trainer.__init__).bind(None, **kwargs, lr=3.7e-4, weight_decay=0.037)
    keys = dict(kv.split("=") for kv in strategy.split(","))
    dp, tp = int(keys.get("dp", 1)), int(keys.get("tp", 1))
    assert kwargs["env_type"] in ENV_TYPES, kwargs["env_type"]
    assert (kwargs["batch_size"], kwargs["gradient_accumulation_steps"]) == (
        int(keys["mbs"]), int(keys["ga"])), kwargs
    for never in ("lr", "weight_decay", "warm_up", "clip_grad", "optimizer_type"):
        assert never not in kwargs, never
    if "deepspeed" not in kwargs["env_type"]:
        assert "deepspeed_config" not in kwargs and not os.path.exists(
            os.path.join(out, "ds_config.json"))
        assert keys["precision"] == "fp32" and kwargs["fp16"] is False, kwargs
        return kwargs["env_type"]
    import deepspeed.comm
    from deepspeed.runtime.config import DeepSpeedConfig

    deepspeed.comm.get_rank = lambda *args, **kw: 0  # as check_deepspeed.py
    assert kwargs["deepspeed_config"] == "ds_config.json"
    assert kwargs["model_parallel_size"] == tp
    assert kwargs["num_nodes"] * kwargs["num_gpus"] == dp * tp, kwargs
    config = DeepSpeedConfig(os.path.join(out, "ds_config.json"), mpu=ModelParallel(dp, tp))
    assert config.train_micro_batch_size_per_gpu == int(keys["mbs"])
    assert config.gradient_accumulation_steps == int(keys["ga"])
    assert config.optimizer_name is None  # the script's optimizer, via trainer.train()
    return f"{kwargs['env_type']}, zero stage {config.zero_optimization_stage}"


if __name__ == "__main__":
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    main(check, "flagai")
