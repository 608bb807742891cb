"""autoaccel's reporting package for users' training scripts.

`autoaccel.trial`: the trial this rank runs (strategy, sizes, steps) and the
metrics protocol's reports; `autoaccel.hf.AutoaccelCallback`: the same for a
Hugging Face Trainer (imports transformers). See docs/LAUNCHERS.md.
"""

from autoaccel.trial import (StepTimer, Trial, TrialError, current, oom_guard, peak_memory_bytes,
                             report_model, report_oom, report_ready, report_step, run_loop)

__version__ = "0.1.0"
__all__ = ["StepTimer", "Trial", "TrialError", "current", "oom_guard", "peak_memory_bytes",
           "report_model", "report_oom", "report_ready", "report_step", "run_loop"]
