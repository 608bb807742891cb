"""The deepspeed export's ds_config.json is accepted by DeepSpeed's own
config class (deepspeed.runtime.config.DeepSpeedConfig), which validates
every section (ZeRO, fp16/bf16/torch_autocast, tensor_parallel, optimizer)
and the batch arithmetic against the data-parallel size. DeepSpeed imports
on a machine without a GPU; the data-parallel size comes from a stand-in
model-parallel unit, as Megatron's mpu would give it."""

import os

from exports import main


class DataParallelOnly:
    def __init__(self, size):
        self.size = size

    def get_data_parallel_world_size(self):
        return self.size

    def get_model_parallel_world_size(self):
        return 1


def check(strategy, doc, out):
    import deepspeed.comm
    from deepspeed.runtime.config import DeepSpeedConfig

    # DeepSpeedConfig asks the process group for this process's rank before
    # it asks the mpu for the data-parallel size, and falls back to a world
    # of 1 when there is no group; this lone process is rank 0.
    deepspeed.comm.get_rank = lambda *args, **kwargs: 0

    keys = dict(kv.split("=") for kv in strategy.split(","))
    dp = int(keys.get("dp", 1))
    config = DeepSpeedConfig(os.path.join(out, "ds_config.json"), mpu=DataParallelOnly(dp))
    assert config.train_micro_batch_size_per_gpu == int(keys["mbs"])
    assert config.gradient_accumulation_steps == int(keys["ga"])
    assert config.zero_optimization_stage == {"none": 0, "zero1": 1, "zero2": 2, "fsdp": 3}[
        keys.get("sharding", "none")] or keys.get("offload") == "cpu"
    precision = keys["precision"]
    assert config.bfloat16_config.enabled == (precision == "pure_bf16")
    assert config.float16_config.enabled == (precision == "fp16")
    assert config.torch_autocast_enabled == (precision == "bf16")
    if precision == "fp16":
        assert config.float16_config.loss_scale == 0  # dynamic
        assert config.float16_config.initial_scale_power == 16
        assert config.float16_config.loss_scale_window == 2000
    return f"zero stage {config.zero_optimization_stage}"


if __name__ == "__main__":
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    main(check, "deepspeed")
