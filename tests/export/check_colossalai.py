"""The colossalai export's autoaccel_colossalai.py, run against colossalai
0.5.0 itself: make_plugin() and make_booster() call the real plugin classes'
and Booster's signatures (an argument a class does not take is a TypeError),
with values ColossalAI's own checks accept (its SUPPORTED_PRECISION lists,
zero_stage and stage ranges, the sequence-parallel modes, the pipeline
arguments), a Booster mixed precision its factory builds, and the layout,
sharding, precision and loop constants the strategy says. The plugins are
not constructed (they need a process group of the strategy's size); the
PipelineGradientCheckpointConfig is. Run with .venv-colossalai's python."""

import importlib.util
import inspect
import os

from exports import main


def load(out, calls):
    """Executes the exported module with the plugin classes and Booster
    replaced by recorders that bind their real signatures."""
    import colossalai.booster
    import colossalai.booster.plugin as plugins

    def recorder(cls):
        signature = inspect.signature(cls.__init__)

        def make(*args, **kwargs):
            signature.bind(None, *args, **kwargs)
            calls.append((cls.__qualname__, kwargs))
            return cls.__qualname__

        return make

    names = ["HybridParallelPlugin", "LowLevelZeroPlugin", "GeminiPlugin", "TorchDDPPlugin"]
    saved = {n: getattr(plugins, n) for n in names}
    saved_booster = colossalai.booster.Booster
    try:
        for n in names:
            setattr(plugins, n, recorder(saved[n]))
        colossalai.booster.Booster = recorder(saved_booster)
        spec = importlib.util.spec_from_file_location(
            "autoaccel_colossalai", os.path.join(out, "autoaccel_colossalai.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.make_booster()
    finally:
        for n in names:
            setattr(plugins, n, saved[n])
        colossalai.booster.Booster = saved_booster
    return module


def check(strategy, doc, out):
    from colossalai.booster.mixed_precision import mixed_precision_factory
    from colossalai.booster.plugin import gemini_plugin, hybrid_parallel_plugin
    from colossalai.booster.plugin import low_level_zero_plugin

    calls = []
    module = load(out, calls)
    (plugin, args), (booster, booster_args) = calls
    assert booster == "Booster" and booster_args["plugin"] == plugin, calls
    if "mixed_precision" in booster_args:
        mixed_precision_factory(booster_args["mixed_precision"])  # bf16's is abstract

    keys = dict(kv.split("=") for kv in strategy.split(","))
    dp, tp, pp, cp = (int(keys.get(k, 1)) for k in ("dp", "tp", "pp", "cp"))
    mbs, ga = int(keys["mbs"]), int(keys["ga"])
    sharding, precision = keys.get("sharding", "none"), keys["precision"]
    offload = keys["offload"] == "cpu"
    if sharding == "fsdp":
        want = "GeminiPlugin"
    elif tp > 1 or pp > 1 or cp > 1:
        want = "HybridParallelPlugin"
    elif sharding != "none" or offload:
        want = "LowLevelZeroPlugin"
    elif precision == "pure_bf16":
        want = "HybridParallelPlugin"
    else:
        want = "TorchDDPPlugin"
    assert plugin == want, (plugin, want)

    zero = {"none": 1 if offload and dp == 1 else 0, "zero1": 1, "zero2": 2, "fsdp": 3}[sharding]
    plugin_precision = args.get("precision")
    if plugin == "HybridParallelPlugin":
        assert (args["tp_size"], args["pp_size"], args["zero_stage"]) == (tp, pp, zero), args
        assert args["zero_stage"] in (0, 1, 2)
        assert plugin_precision in hybrid_parallel_plugin.PRECISION_TORCH_TYPE
        if args["zero_stage"] > 0:
            assert plugin_precision in ("fp16", "bf16"), args
        if pp > 1:
            assert args["zero_stage"] <= 1, args
            assert (args["num_microbatches"], args["microbatch_size"]) == (ga, mbs), args
            assert args["pp_style"] == {"1f1b": "1f1b", "interleaved": "interleaved"}[
                keys["pp_schedule"]], args
            if args["pp_style"] == "interleaved":
                assert args["num_model_chunks"] == int(keys["vpp"]) > 1, args
        if cp > 1:
            # Context parallelism is the plugin's ring attention over sp_size ranks.
            assert args["enable_sequence_parallelism"] is True
            assert (args["sequence_parallelism_mode"], args["sp_size"]) == ("ring_attn", cp), args
            assert "ring_attn" in hybrid_parallel_plugin.SUPPORT_SP_MODE
        elif keys.get("sp") == "1":
            assert args["enable_sequence_parallelism"] is True
            assert args["sequence_parallelism_mode"] == "split_gather"
            assert "split_gather" in hybrid_parallel_plugin.SUPPORT_SP_MODE
    elif plugin == "LowLevelZeroPlugin":
        assert args["stage"] == zero in (1, 2), args
        assert plugin_precision in low_level_zero_plugin.SUPPORTED_PRECISION
    elif plugin == "GeminiPlugin":
        assert plugin_precision in gemini_plugin.SUPPORTED_PRECISION
        assert args["placement_policy"] == "static" and args["shard_param_frac"] == 1.0, args
        assert args.get("tp_size", 1) == tp, args
        assert args.get("enable_gradient_accumulation", False) == (ga > 1), args
        assert args.get("offload_optim_frac", 0.0) == (1.0 if offload else 0.0), args
    else:
        assert args == {}, args
    if plugin != "GeminiPlugin":
        assert args.get("cpu_offload", False) == offload, args

    # Precision: the plugin's, the Booster's, or autocast over fp32 weights.
    can_fp32 = plugin != "GeminiPlugin" and not (plugin == "HybridParallelPlugin" and zero > 0)
    if precision == "bf16" and can_fp32:
        assert module.AUTOCAST_DTYPE == "bfloat16"
        assert plugin_precision in (None, "fp32"), plugin_precision
    else:
        assert module.AUTOCAST_DTYPE is None
        want_precision = {"fp32": "fp32", "bf16": "bf16", "pure_bf16": "bf16", "fp16": "fp16"}
        if plugin == "TorchDDPPlugin":
            assert booster_args.get("mixed_precision") == (
                "fp16" if precision == "fp16" else None), booster_args
        else:
            assert plugin_precision == want_precision[precision], (plugin_precision, precision)
        if plugin_precision == "fp16":
            assert (args["initial_scale"], args["growth_interval"], args["hysteresis"]) == (
                2**16, 2000, 1), args
    assert (module.MICRO_BATCH_SIZE, module.GRAD_ACCUM_STEPS) == (mbs, ga)
    assert module.GRADIENT_CHECKPOINTING == (keys["checkpoint"] != "none")
    assert module.ATTN_IMPLEMENTATION == ("sdpa" if keys["attention"] == "sdpa" else "eager")
    for never in ("lr", "weight_decay", "betas", "eps", "max_norm"):
        assert never not in args, (never, args)
    return f"{plugin}({', '.join(f'{k}={v}' for k, v in args.items())})"


if __name__ == "__main__":
    main(check, "colossalai")
