"""autoaccel's Python package.

The client (needs grpcio and protobuf, installed with the package): `Client`
tunes, follows jobs, looks up, exports and estimates strategies; `Job` is a
submitted job; `autoaccel.results` holds what comes back, `autoaccel.errors`
what is raised; `autoaccel.to_rows` / `autoaccel.to_dataframe` turn a list of
results into a table (pandas optional). See python/README.md.

The reporting module of launcher trials (standard library only): `autoaccel.trial`,
the trial this rank runs (strategy, sizes, steps) and the metrics protocol's
reports; `autoaccel.hf.AutoaccelCallback`, the same for a Hugging Face Trainer
(imports transformers). See docs/LAUNCHERS.md. Importing the package imports
no client module, so a training script needs neither grpcio nor protobuf.

Applying a strategy to your own PyTorch model: `autoaccel.torch.apply` (imports
torch), reading the strategy through `autoaccel.strategy` (standard library).
See python/README.md.
"""

from autoaccel.trial import (StepTimer, Trial, TrialError, current, oom_guard, peak_memory_bytes,
                             report_model, report_oom, report_ready, report_step, run_loop)

__version__ = "0.1.0"
__all__ = ["Client", "Job", "StepTimer", "Trial", "TrialError", "current", "oom_guard",
           "peak_memory_bytes", "report_model", "report_oom", "report_ready", "report_step",
           "run_loop", "to_dataframe", "to_rows"]

# Imported on first use (PEP 562): `from autoaccel import Client`.
_LAZY = {"Client": "autoaccel.client", "Job": "autoaccel.client",
         "to_rows": "autoaccel.tables", "to_dataframe": "autoaccel.tables"}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module 'autoaccel' has no attribute %r" % name)
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
