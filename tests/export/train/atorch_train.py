"""An ordinary ATorch training script, as a user of the atorch export runs it:
    torchrun --nnodes=1 --nproc-per-node=N train.py
It reads the export's load_strategy.txt, a Python literal, with
ast.literal_eval (no torch names in it: dtypes are ATorch's strings "bf16" /
"fp16", layer classes are names), hands the list to ATorch's
auto_accelerate(load_strategy=...) with the user's own model, optimizer and
data, and trains with the model, optimizer, dataloader and loss function it
returns. What the fidelity notes leave to the script is in user_args.json
beside the export: the DataLoader's batch size (ATorch's is the total over the
data-parallel ranks), accumulation, the optimizer's fused/foreach, what to
load the model with (attention implementation, use_cache), and the user's
hyperparameters.

For the test (tests/export/check_atorch.py) one process runs several exports
of the same world size in turn, each a directory given on the command line
(default: the current one), since ATorch takes ~8 s to import; each gets a
fresh model. An export whose user_args.json says "run": false (its world
size is not this one) is only parsed by ATorch. Each rank writes what it ran
(probe.py) to DIR/probe/rankN.json, with what ATorch returned and logged."""

import ast
import inspect
import json
import logging
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import Probe, TokenData  # noqa: E402

import torch  # noqa: E402

import atorch  # noqa: E402
from atorch.auto import auto_accelerate  # noqa: E402
from atorch.auto.accelerate import get_strategy  # noqa: E402
from atorch.auto.opt_lib.module_replace_optimization import REPLACEMENT_PAIRS  # noqa: E402
from atorch.auto.opt_lib.optimization_library import OptimizationLibrary  # noqa: E402
from atorch.common.log_utils import default_logger  # noqa: E402
from atorch.distributed.distributed import _get_pg_ranks  # noqa: E402


class AtorchLog(logging.Handler):
    """What ATorch logs while it applies a strategy: its errors (a failed
    transform is logged with its traceback, then auto_accelerate asserts)
    and the lines saying it ignored a method."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.errors, self.ignored = [], []

    def emit(self, record):
        message = record.getMessage()
        if record.levelno >= logging.ERROR:
            # A traceback's last line is the exception.
            self.errors.append(message.strip().splitlines()[-1])
        if "ignored" in message.lower():
            self.ignored.append(message.strip().splitlines()[0])


def loss_func(batch, output):
    return output.loss


def scaler_settings(scaler):
    """amp_native's GradScaler. A disabled one (no CUDA) keeps no settings:
    then its class's defaults, which ATorch's GradScaler() takes."""
    if scaler.is_enabled():
        settings = {k: getattr(scaler, "_" + k)
                    for k in ("init_scale", "growth_factor", "backoff_factor", "growth_interval")}
    else:
        parameters = inspect.signature(type(scaler).__init__).parameters
        settings = {k: parameters[k].default
                    for k in ("init_scale", "growth_factor", "backoff_factor", "growth_interval")}
    return dict(settings, **{"class": type(scaler).__name__, "enabled": scaler.is_enabled()})


def parse_with_atorch(strategy):
    """ATorch's own parser: get_strategy and OptimizationLibrary's
    validate_strategy, as auto_accelerate calls them first."""
    ok, parsed = get_strategy(strategy)
    return bool(ok and OptimizationLibrary().validate_strategy(parsed))


def run(directory, world):
    with open(os.path.join(directory, "load_strategy.txt")) as f:
        strategy = ast.literal_eval(f.read())
    with open(os.path.join(directory, "user_args.json")) as f:
        user = json.load(f)
    probe_dir = os.path.join(directory, "probe")
    os.makedirs(probe_dir, exist_ok=True)
    os.environ["AUTOACCEL_PROBE_DIR"] = probe_dir
    rank = int(os.environ.get("RANK", "0"))
    record = {"rank": rank, "validated": parse_with_atorch(strategy),
              "replacement_pairs": sorted(REPLACEMENT_PAIRS)}
    for name, config in (m for m in strategy if isinstance(m, tuple)):
        if name == "parallel_mode":  # ATorch's rank groups for this layout
            groups = config[0]
            total = 1
            for _, size in groups:
                total *= size
            record["rank_groups"] = _get_pg_ranks(groups, list(range(total)), 0, total)
    if not user["run"]:
        path = os.path.join(probe_dir, f"rank{rank}.json")
        with open(path, "w") as f:
            json.dump(record, f)
        return

    from transformers import AutoConfig, AutoModelForCausalLM
    torch.manual_seed(0)
    # from_pretrained(path, **model_kwargs) as a user loads it: the keys that
    # are not loading arguments (use_cache) set the config's.
    kwargs = dict(user["model_kwargs"])
    attention = kwargs.pop("attn_implementation")
    config = AutoConfig.from_pretrained(user["model_dir"], **kwargs)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attention)
    probe = Probe()
    probe.watch(model)
    layers = list(model.model.layers)
    optim_args = {"lr": user["lr"], "weight_decay": user["weight_decay"],
                  "betas": tuple(user["betas"]), "eps": user["eps"]}
    optim_args.update(user["optimizer_kwargs"])
    log = AtorchLog()
    default_logger.addHandler(log)
    try:
        status, result, returned = auto_accelerate(
            model, optim_func=torch.optim.AdamW, dataset=TokenData(config.vocab_size, 16),
            loss_func=loss_func, optim_args=optim_args,
            dataloader_args={"batch_size": user["batch_size"], "num_workers": 0},
            model_input_format="unpack_dict", load_strategy=strategy)
    except Exception as e:  # noqa: BLE001 - ATorch asserts after logging the transform's error
        status, result, returned = False, None, None
        record["raised"] = f"{type(e).__name__}: {e}".strip()
        if not log.errors:
            record["traceback"] = traceback.format_exc()
    finally:
        default_logger.removeHandler(log)
    record.update(status=status, atorch_errors=log.errors, atorch_ignored=log.ignored)
    if not status:
        path = os.path.join(probe_dir, f"rank{rank}.json")
        with open(path, "w") as f:
            json.dump(record, f)
        return

    model, optimizer = result.model, result.optim
    cuda_autocast = set()
    # ATorch's amp_native wraps the model's forward in CUDA's autocast.
    layers[0].register_forward_pre_hook(
        lambda m, a: cuda_autocast.add(torch.is_autocast_enabled("cuda")))
    probe.count_steps(optimizer)
    data = iter(result.dataloader)
    device = torch.device("cpu")
    for _ in range(user["max_steps"]):
        for _ in range(user["accumulation"]):
            batch = result.prepare_input(next(data), device)
            loss = result.loss_func(batch, model(**batch))
            (loss / user["accumulation"]).backward()
        optimizer.step()
        optimizer.zero_grad()
    scaler = getattr(optimizer, "grad_scaler", None)
    record.update(
        methods=[[name, repr(config)] for name, config, _ in returned],
        model_class=type(model).__name__,
        ddp_world=(torch.distributed.get_world_size(model.process_group)
                   if isinstance(model, torch.nn.parallel.DistributedDataParallel) else None),
        optimizer_wrapper=type(optimizer).__name__,
        grad_scaler=None if scaler is None else scaler_settings(scaler),
        cuda_autocast=sorted(cuda_autocast),
        dataloader_batch_size=result.dataloader.batch_size,
        layer_calls=probe.layer_calls,
        use_cache=config.use_cache,
        world=world)
    probe.report(optimizer, probe.optimizer_steps, **record)


def main():
    atorch.init_distributed("gloo")  # "nccl" on GPUs
    world = int(os.environ.get("WORLD_SIZE", "1"))
    for directory in sys.argv[1:] or ["."]:
        run(directory, world)
    atorch.reset_distributed()


if __name__ == "__main__":
    main()
