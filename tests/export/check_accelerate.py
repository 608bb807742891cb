"""The accelerate export's YAML loads with accelerate's own config loader
(accelerate.commands.config.config_args.load_config_from_file), and its
parallelism_config, where there is one, passes accelerate's ParallelismConfig
checks. Also: what the exporter rejects for accelerate, accelerate itself
refuses (tensor parallelism with replicated data parallelism)."""

import os

from exports import main


def check(strategy, doc, out):
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils import TorchContextParallelConfig

    config = load_config_from_file(os.path.join(out, "accelerate_config.yaml"))
    keys = dict(kv.split("=") for kv in strategy.split(","))
    dp, tp, pp, cp = (int(keys.get(k, 1)) for k in ("dp", "tp", "pp", "cp"))
    assert config.num_processes == dp * tp * pp * cp, config.num_processes
    kind = str(config.distributed_type)
    if config.parallelism_config:
        pc = {k.replace("parallelism_config_", ""): v for k, v in config.parallelism_config.items()}
        handler = None
        if pc["cp_size"] > 1:
            handler = TorchContextParallelConfig(cp_comm_strategy=pc["cp_comm_strategy"])
        parallelism = ParallelismConfig(dp_replicate_size=pc["dp_replicate_size"],
                                        dp_shard_size=pc["dp_shard_size"], tp_size=pc["tp_size"],
                                        cp_size=pc["cp_size"], cp_handler=handler)
        assert parallelism.total_size == dp * tp * pp * cp, parallelism
        assert pc["cp_size"] == cp, pc
    if keys["precision"] == "fp8":
        # torchao's float8 (tensorwise current scaling) through accelerate.
        assert str(config.mixed_precision) == "fp8", config.mixed_precision
        assert config.fp8_config == {"backend": "AO"}, config.fp8_config
    if config.deepspeed_config:
        assert os.path.exists(os.path.join(out, config.deepspeed_config["deepspeed_config_file"]))
    return f"{kind}, mixed_precision {config.mixed_precision}"


def accelerate_refuses_what_we_reject():
    from accelerate.parallelism_config import ParallelismConfig
    try:
        ParallelismConfig(dp_replicate_size=2, dp_shard_size=1, tp_size=2)
    except ValueError:
        return
    raise AssertionError("accelerate accepted TP with replicated DP; the exporter rejects it")


if __name__ == "__main__":
    accelerate_refuses_what_we_reject()
    main(check, "accelerate")
