"""One autoaccel launcher trial, seen from the training script.

The worker that starts a rank sets AUTOACCEL_STRATEGY_FILE (the strategy it
chose, with the derived sizes), AUTOACCEL_METRICS_FILE, AUTOACCEL_WARMUP_STEPS
and AUTOACCEL_MEASURED_STEPS, besides the torchrun variables. `current()`
reads them into a `Trial`; the script trains with the strategy's values and
reports each optimizer step, and the worker stops the rank once it has
reported warm-up + measured steps (docs/LAUNCHERS.md, "metrics protocol").

Run without those variables (standalone, or under a plain torchrun), `current()`
returns an inactive trial and every report is a no-op, so a script that uses
this module still trains on its own.

Standard library only. torch is used where the script has imported it (to
synchronise the device and read its peak memory); this module never imports
it. Not thread-safe: report from the thread that trains.
"""

import contextlib
import json
import math
import os
import resource
import sys
import time
import traceback

__all__ = [
    "Trial",
    "TrialError",
    "StepTimer",
    "current",
    "is_out_of_memory",
    "oom_guard",
    "peak_memory_bytes",
    "report_model",
    "report_oom",
    "report_ready",
    "report_step",
    "run_loop",
]

_IMPORTED_AT = time.monotonic()


class TrialError(RuntimeError):
    """The worker's environment or strategy file cannot be used."""


class Trial:
    """The trial this process is one rank of (or an inactive stand-in).

    Attributes (all read-only by convention): `active` (False: reports do
    nothing), `rank`, `world_size`, `local_rank`, `strategy` (the strategy's
    JSON object: micro_batch_size, grad_accum_steps, precision, ...),
    `strategy_text`, `seq_len`, `global_batch_size`, `warmup_steps`,
    `measured_steps`, `total_steps` (their sum), `trial_id`, `trial_dir`,
    `metrics_file`, `files` (exported file name -> absolute path), `model`
    (the job's model config, or None), `device_type` ("cpu", "cuda", ...).
    """

    def __init__(self, *, active=False, rank=0, world_size=1, local_rank=0, strategy=None,
                 strategy_text="", seq_len=0, global_batch_size=0, warmup_steps=0,
                 measured_steps=0, trial_id="", trial_dir=None, metrics_file=None, files=None,
                 model=None, device_type="cpu"):
        if active and not metrics_file:
            raise TrialError("an active trial needs a metrics file (AUTOACCEL_METRICS_FILE)")
        self.active = bool(active)
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.local_rank = int(local_rank)
        self.strategy = dict(strategy or {})
        self.strategy_text = strategy_text
        self.seq_len = int(seq_len)
        self.global_batch_size = int(global_batch_size)
        self.warmup_steps = int(warmup_steps)
        self.measured_steps = int(measured_steps)
        self.trial_id = trial_id
        self.trial_dir = trial_dir
        self.metrics_file = metrics_file
        self.files = dict(files or {})
        self.model = model
        self.device_type = device_type
        self._ready_reported = False

    @property
    def total_steps(self):
        return self.warmup_steps + self.measured_steps

    @classmethod
    def standalone(cls, strategy=None, seq_len=0, global_batch_size=0, warmup_steps=0,
                   measured_steps=0, device_type="cpu"):
        """An inactive trial holding a script's own settings (from its flags),
        for running without autoaccel. rank/world_size come from the torchrun
        variables when they are set."""
        return cls(active=False, rank=_env_int("RANK", 0), world_size=_env_int("WORLD_SIZE", 1),
                   local_rank=_env_int("LOCAL_RANK", 0), strategy=strategy, seq_len=seq_len,
                   global_batch_size=global_batch_size, warmup_steps=warmup_steps,
                   measured_steps=measured_steps, device_type=device_type)

    def __repr__(self):
        return ("Trial(active=%r, id=%r, rank=%d/%d, %s, seq_len=%d, global_batch_size=%d, "
                "steps=%d+%d)" % (self.active, self.trial_id, self.rank, self.world_size,
                                  self.strategy_text or self.strategy, self.seq_len,
                                  self.global_batch_size, self.warmup_steps, self.measured_steps))

    # Reporting: one JSON object per line, appended with a single write and
    # so visible to the worker at once. Nothing when inactive.

    def report_step(self, step, step_time_s, tokens=None, samples=None, loss=None,
                    peak_memory_bytes=None):
        """One optimizer step: `step` counts from 1; `tokens` and `samples`
        count the whole global batch it trained (every data-parallel replica,
        every micro-batch); `peak_memory_bytes` is this rank's peak so far.
        A loss that is not a finite number is left out (JSON has no NaN)."""
        record = {"event": "step", "step": int(step), "step_time_s": _positive(step_time_s)}
        if tokens is not None:
            record["tokens"] = int(tokens)
        if samples is not None:
            record["samples"] = int(samples)
        loss = _as_float(loss)
        if loss is not None and math.isfinite(loss):
            record["loss"] = loss
        if peak_memory_bytes is not None:
            record["peak_memory_bytes"] = int(peak_memory_bytes)
        self._write(record)

    def report_oom(self, message):
        """The script ran out of memory (the worker records the trial OOM)."""
        self._write({"event": "oom", "message": str(message)[:2000]})

    def report_model(self, parameters):
        """The trained model's parameter count (for FLOPs when the job gave
        no model config). Count before sharding wraps the model."""
        self._write({"event": "model", "parameters": int(parameters)})

    def report_ready(self):
        """The model and data are built and the first step begins; reported
        once per process, with the seconds since the process started."""
        if self._ready_reported:
            return
        self._ready_reported = True
        self._write({"event": "ready", "seconds": round(_seconds_since_process_start(), 3)})

    def _write(self, record):
        if not self.active:
            return
        line = (json.dumps(record) + "\n").encode("utf-8")
        fd = os.open(self.metrics_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


_current = None


def current(standalone=None):
    """The trial this process runs (read once, then cached).

    Without AUTOACCEL_STRATEGY_FILE in the environment: `standalone` (an
    inactive Trial, e.g. from `Trial.standalone(...)` with the script's flags)
    or an empty inactive trial. Raises TrialError when the variable names a
    file that cannot be read or is not a strategy file."""
    global _current
    if _current is not None:
        return _current
    path = os.environ.get("AUTOACCEL_STRATEGY_FILE")
    if not path:
        trial = standalone if standalone is not None else Trial.standalone()
        if trial.active:
            raise TrialError("current(standalone=...) takes an inactive trial")
        _current = trial
        return trial
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise TrialError("AUTOACCEL_STRATEGY_FILE=%s: %s" % (path, e)) from e
    if not isinstance(doc, dict) or not isinstance(doc.get("strategy"), dict):
        raise TrialError("AUTOACCEL_STRATEGY_FILE=%s: not a strategy file (no \"strategy\" "
                         "object)" % path)
    metrics = os.environ.get("AUTOACCEL_METRICS_FILE")
    if not metrics:
        raise TrialError("AUTOACCEL_STRATEGY_FILE is set but AUTOACCEL_METRICS_FILE is not")
    _current = Trial(
        active=True,
        rank=_env_int("RANK", doc.get("rank", 0)),
        world_size=_env_int("WORLD_SIZE", doc.get("world_size", 1)),
        local_rank=_env_int("LOCAL_RANK", doc.get("local_rank", 0)),
        strategy=doc["strategy"],
        strategy_text=doc.get("strategy_text", ""),
        seq_len=doc.get("seq_len", 0),
        global_batch_size=doc.get("global_batch_size", 0),
        warmup_steps=_env_int("AUTOACCEL_WARMUP_STEPS", doc.get("warmup_steps", 0)),
        measured_steps=_env_int("AUTOACCEL_MEASURED_STEPS", doc.get("measured_steps", 0)),
        trial_id=os.environ.get("AUTOACCEL_TRIAL_ID", doc.get("trial_id", "")),
        trial_dir=os.environ.get("AUTOACCEL_TRIAL_DIR", os.path.dirname(os.path.abspath(path))),
        metrics_file=metrics,
        files=doc.get("files") or {},
        model=doc.get("model"),
        device_type=os.environ.get("AUTOACCEL_DEVICE_TYPE", doc.get("device_type", "cpu")),
    )
    return _current


def report_step(step, step_time_s, tokens=None, samples=None, loss=None, peak_memory_bytes=None):
    current().report_step(step, step_time_s, tokens, samples, loss, peak_memory_bytes)


def report_oom(message):
    current().report_oom(message)


def report_model(parameters):
    current().report_model(parameters)


def report_ready():
    current().report_ready()


def _torch():
    return sys.modules.get("torch")


def _synchronize():
    """Waits for the device's queued work when torch drives an accelerator
    that this process has initialised (cuda; others through torch.<type>)."""
    torch = _torch()
    if torch is None:
        return
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
        return
    device_type = os.environ.get("AUTOACCEL_DEVICE_TYPE", "cpu")
    backend = getattr(torch, device_type, None) if device_type not in ("cpu", "cuda") else None
    if backend is not None and hasattr(backend, "synchronize"):
        backend.synchronize()


class StepTimer:
    """Times a block in seconds (`.seconds` after it ends), synchronising the
    device on entry and exit so queued kernels count where they ran."""

    def __init__(self):
        self.seconds = None
        self._start = None

    def __enter__(self):
        _synchronize()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        _synchronize()
        self.seconds = time.perf_counter() - self._start
        return False


def peak_memory_bytes():
    """This rank's peak memory so far: torch.cuda.max_memory_allocated() when
    CUDA is initialised, else this process's peak resident set (ru_maxrss)."""
    torch = _torch()
    if torch is not None and torch.cuda.is_initialized():
        return int(torch.cuda.max_memory_allocated())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def is_out_of_memory(exc):
    """True for torch.OutOfMemoryError, MemoryError and the RuntimeErrors
    allocators raise with "out of memory" in their message."""
    torch = _torch()
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    if isinstance(exc, MemoryError):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


@contextlib.contextmanager
def oom_guard(trial=None):
    """Runs the block; if it runs out of memory, reports an `oom` event,
    prints the traceback and exits with status 1. Other errors pass through."""
    try:
        yield
    except BaseException as e:  # noqa: B902 - filtered just below
        if not is_out_of_memory(e):
            raise
        (trial or current()).report_oom("%s: %s" % (type(e).__name__, e))
        traceback.print_exc()
        sys.stderr.flush()
        sys.exit(1)


def run_loop(step_fn, trial=None):
    """The plain training loop's reporting: calls `step_fn(i)` for
    i = 0 .. total_steps - 1, one optimizer step each (all its micro-batches),
    times it with StepTimer and reports it with tokens = global_batch_size *
    seq_len, samples = global_batch_size, the loss `step_fn` returned (a
    number or a one-element tensor) and peak_memory_bytes(). Reports `ready`
    before the first step. Running out of memory reports `oom` and exits 1.
    Returns the step times in seconds."""
    trial = trial or current()
    times = []
    with oom_guard(trial):
        trial.report_ready()
        for i in range(trial.total_steps):
            with StepTimer() as timer:
                loss = step_fn(i)
            times.append(timer.seconds)
            trial.report_step(i + 1, timer.seconds,
                              tokens=trial.global_batch_size * trial.seq_len,
                              samples=trial.global_batch_size, loss=loss,
                              peak_memory_bytes=peak_memory_bytes())
    return times


def _as_float(value):
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)
    numel = getattr(value, "numel", None)
    if callable(item) and (numel is None or numel() == 1):
        return float(item())
    return None


def _positive(seconds):
    # The protocol requires step_time_s > 0; perf_counter has nanosecond
    # resolution, so this only guards a clock that did not move.
    return max(float(seconds), 1e-9)


def _env_int(name, default):
    value = os.environ.get(name)
    if value is None or value == "":
        return int(default)
    try:
        return int(value)
    except ValueError:
        raise TrialError("%s=%r is not an integer" % (name, value)) from None


def _seconds_since_process_start():
    try:  # Linux: the process's start time in clock ticks after boot
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED_AT
