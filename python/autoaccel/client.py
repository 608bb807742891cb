"""autoaccel's Python client: tune from a script or a notebook.

    from autoaccel import Client
    client = Client("coordinator:50051", tls_ca="ca.pem")   # token from ~/.config/autoaccel/token
    job = client.tune("gpt2", config="config.json", seq_len=1024, global_batch_size=32,
                      time_limit=600)
    for event in job.watch():
        print(event.job.state, event.job.trials_done, [t.status for t in event.trials])
    print(job.wait().best.strategy)

`Client` speaks gRPC to the coordinator (`autoaccel-server`) with the same
credentials as the CLI; `export` and `estimate`, which need no coordinator,
run the `autoaccel` CLI binary with --json. Not thread-safe for one `Job`'s
watch; a `Client` may be shared between threads (gRPC channels are).
"""

import json
import logging
import os
import random
import time
from datetime import timedelta
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import grpc

from autoaccel import errors
from autoaccel._convert import from_json, from_message
from autoaccel._proto import autoaccel_pb2 as pb
from autoaccel._proto import autoaccel_pb2_grpc as pb_grpc
from autoaccel.results import (Estimate, ExportResult, JobEvent, JobInfo, StrategyAnswer, Trial,
                               TrialLogs, Worker)

__all__ = ["Client", "Job"]

log = logging.getLogger("autoaccel")

DEFAULT_SERVER = "127.0.0.1:50051"
# As the CLI's (client/commands.h, client/watch_retry.h).
DEFAULT_TIMEOUT_S = 15.0
DEFAULT_WATCH_TIMEOUT_S = 48 * 3600.0
DEFAULT_RECONNECT_FOR_S = 300.0
_BACKOFF_INITIAL_S, _BACKOFF_MAX_S, _BACKOFF_JITTER = 0.5, 10.0, 0.2
# Tokens shorter than this are refused (common/token_files.h).
_MIN_TOKEN_LENGTH = 16
# Watch stream errors a reconnect may cure (client/watch_retry.h).
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED, grpc.StatusCode.CANCELLED)

Seconds = Union[float, int, timedelta]
PathLike = Union[str, "os.PathLike[str]"]
# A candidate list: a sequence, or one comma-separated string as the CLI's flags take.
Strings = Union[str, Sequence[str]]
Ints = Union[str, int, Sequence[int]]
# A model config: a config.json's path, or the config itself.
Config = Union[PathLike, Mapping[str, Any]]


def _seconds(value: Optional[Seconds]) -> float:
    if value is None:
        return 0.0
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


def _strings(values: Union[str, Sequence[str]]) -> List[str]:
    """A candidate list given as a sequence or, as the CLI takes it, one
    comma-separated string ("bf16,fp32")."""
    if isinstance(values, str):
        return [v.strip() for v in values.split(",") if v.strip()]
    return [str(v) for v in values]


# The searched dimensions' candidate lists: (Client.tune's keyword, the
# TuneRequest field, how a value is read), one per row of the coordinator's
# table (search/space_dimensions.h; search.SpaceDimensionsTest checks that
# the two agree), so that a new dimension is a row here too.
SPACE_DIMENSIONS = (
    ("tp_sizes", "tensor_parallel_sizes", "ints"),
    ("pp_sizes", "pipeline_parallel_sizes", "ints"),
    ("shardings", "shardings", "strings"),
    ("sequence_parallel", "sequence_parallel", "strings"),
    ("cp_sizes", "context_parallel_sizes", "ints"),
    ("cp_comms", "context_parallel_comms", "strings"),
    ("ep_sizes", "expert_parallel_sizes", "ints"),
    ("pipeline_schedules", "pipeline_schedules", "strings"),
    ("virtual_stages", "virtual_stages", "ints"),
    ("micro_batch_sizes", "micro_batch_sizes", "ints"),
    ("precisions", "precisions", "strings"),
    ("checkpointings", "checkpointings", "strings"),
    ("checkpoint_percents", "checkpoint_percents", "ints"),
    ("attentions", "attentions", "strings"),
    ("optimizers", "optimizers", "strings"),
    ("offloads", "offloads", "strings"),
)


def _candidate_lists(candidates: Dict[str, Any]) -> Dict[str, list]:
    """Client.tune's candidate keywords as TuneRequest fields; TypeError
    for a keyword that is no dimension, as Python raises for a keyword a
    function does not take."""
    known = {keyword: (field, kind) for keyword, field, kind in SPACE_DIMENSIONS}
    fields = {}
    for keyword, values in candidates.items():
        if keyword not in known:
            raise TypeError(f"tune() got an unexpected keyword argument '{keyword}' "
                            f"(search dimensions: {', '.join(known)})")
        field, kind = known[keyword]
        fields[field] = _ints(values) if kind == "ints" else _strings(values)
    return fields


def _ints(values: Union[str, int, Sequence[int]]) -> List[int]:
    """As _strings, for numbers ("1,2,4", 4 or [1, 2, 4]); a value that is
    not a whole number raises InvalidArgumentError naming it."""
    if isinstance(values, int):
        return [values]
    out = []
    for v in _strings(values) if isinstance(values, str) else values:
        try:
            out.append(int(v))
        except (TypeError, ValueError):
            raise errors.InvalidArgumentError(
                f"expected whole numbers, got {v!r} in {values!r}") from None
    return out


def _error(e: grpc.RpcError, address: str) -> errors.AutoaccelError:
    """The exception for a failed call: the server's message, or for
    UNAVAILABLE which server could not be reached."""
    code, details = e.code(), e.details() or ""
    if code == grpc.StatusCode.UNAVAILABLE:
        details = "cannot reach the autoaccel server at %s (%s)" % (address, details)
    return errors.error_for_code(code.name, details)


def _read_token_file(path: str, where: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            lines = [l.strip() for l in f.read().splitlines() if l.strip()]
    except OSError as e:
        raise errors.InvalidArgumentError("%s %s: cannot read it (%s)"
                                          % (where, path, e.strerror)) from None
    if not lines:
        raise errors.InvalidArgumentError("%s %s: holds no token" % (where, path))
    if len(lines[0]) < _MIN_TOKEN_LENGTH:
        raise errors.InvalidArgumentError("%s %s: the token is shorter than %d characters"
                                          % (where, path, _MIN_TOKEN_LENGTH))
    return lines[0]


def _resolve_token(token: Optional[str], token_file: Optional[PathLike]) -> str:
    """As the CLI: `token`, `token_file`, $AUTOACCEL_TOKEN, $AUTOACCEL_TOKEN_FILE,
    then $XDG_CONFIG_HOME/autoaccel/token or ~/.config/autoaccel/token if it
    exists; "" for none."""
    if token:
        return token
    if token_file:
        return _read_token_file(os.fspath(token_file), "token_file")
    if os.environ.get("AUTOACCEL_TOKEN"):
        return os.environ["AUTOACCEL_TOKEN"]
    if os.environ.get("AUTOACCEL_TOKEN_FILE"):
        return _read_token_file(os.environ["AUTOACCEL_TOKEN_FILE"], "$AUTOACCEL_TOKEN_FILE")
    config_home = os.environ.get("XDG_CONFIG_HOME") or (
        os.path.join(os.environ["HOME"], ".config") if os.environ.get("HOME") else "")
    default = os.path.join(config_home, "autoaccel", "token") if config_home else ""
    if default and os.path.exists(default):
        return _read_token_file(default, "token file")
    return ""


def _model_spec(model: Optional[str], config: Optional[Config], overrides: Sequence[str],
                new_overrides: Sequence[str], model_file: Optional[PathLike],
                input_spec: str) -> pb.ModelSpec:
    spec = pb.ModelSpec(family=model or "", overrides=list(overrides),
                        new_overrides=list(new_overrides), input_spec=input_spec)
    if config is not None:
        spec.config_json = _config_text(config)
    if model_file is not None:
        with open(os.fspath(model_file), "rb") as f:
            spec.script = f.read()
    return spec


def _config_text(config: Config) -> str:
    if isinstance(config, Mapping):
        return json.dumps(dict(config))
    path = os.fspath(config)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise errors.InvalidArgumentError("config %s: cannot read it (%s)"
                                          % (path, e.strerror)) from None


def _trial_change_key(t: Trial) -> tuple:
    """What a watcher sees change in a trial (not its timestamps, which a
    repeated trial may carry rounded differently)."""
    return (t.attempt, t.status, t.reason, t.metrics, tuple(t.worker_ids),
            tuple(t.failed_attempts), t.infrastructure, t.predicted, t.proxy)


class Job:
    """A submitted tuning job: follow it (`watch`, `wait`), list its trials,
    cancel it. Made by `Client.tune` or `Client.job`; `info` is the job as
    last seen (refreshed by `refresh`, `wait` and `cancel`)."""

    def __init__(self, client: "Client", info: JobInfo):
        self._client = client
        self.info = info

    @property
    def id(self) -> str:
        """The job id, e.g. "job-20261121-221530-ab12"."""
        return self.info.job_id

    def __repr__(self) -> str:
        return "Job(%r, state=%r)" % (self.id, self.info.state)

    def refresh(self) -> JobInfo:
        """The job as the coordinator knows it now (GetJob)."""
        self.info = self._client._job_info(self.id)
        return self.info

    def watch(self, *, include_pruned: bool = False, timeout: Optional[Seconds] = None,
              reconnect_for: Optional[Seconds] = None) -> Iterator[JobEvent]:
        """Yields the job's progress events until it ends: each the job now and
        the trials that changed (the first: every trial so far). The last event
        is the job's terminal state (SUCCEEDED, FAILED or CANCELLED).

        As `autoaccel watch`: a stream lost after it delivered (the coordinator
        restarted, the network dropped) is opened again with backoff (0.5 s
        doubling to 10 s, jittered) for up to `reconnect_for` seconds (default
        300; 0 gives up at once: UnavailableError), logging each attempt on the
        "autoaccel" logger. A trial that a stream repeats unchanged (same
        attempt, status, reason, metrics and workers; the new stream's first
        events, or the final one, list every trial) is not yielded again.
        `timeout` (default 48 h) bounds the whole watch: DeadlineExceededError
        then, the job keeps running. `include_pruned` also yields the PRUNED
        candidates as trials. Closing the generator ends the stream; the job
        keeps running (`cancel` stops it).
        """
        limit = DEFAULT_WATCH_TIMEOUT_S if timeout is None else _seconds(timeout)
        budget = DEFAULT_RECONNECT_FOR_S if reconnect_for is None else _seconds(reconnect_for)
        deadline = time.monotonic() + limit
        seen: Dict[str, tuple] = {}  # _trial_change_key of each trial yielded
        ever_delivered = False
        lost_at: Optional[float] = None  # when the stream was lost, while reconnecting
        attempt = 0
        request = pb.WatchJobRequest(job_id=self.id, include_pruned=include_pruned)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.DeadlineExceededError(
                    "watch of job %s: the timeout ran out; the job keeps running" % self.id)
            stream = self._client._stub.WatchJob(request, timeout=left,
                                                 metadata=self._client._metadata)
            failure: Optional[grpc.RpcError] = None
            try:
                for message in stream:
                    event = from_message(JobEvent, message)
                    if lost_at is not None:
                        log.warning("autoaccel: reconnected to the coordinator at %s",
                                    self._client.address)
                        lost_at, attempt = None, 0
                    ever_delivered = True
                    changed = [t for t in event.trials
                               if seen.get(t.trial_id) != _trial_change_key(t)]
                    for t in changed:
                        seen[t.trial_id] = _trial_change_key(t)
                    self.info = event.job
                    yield JobEvent(job=event.job, trials=changed)
                    if event.job.terminal:
                        return
            except grpc.RpcError as e:
                failure = e
            finally:
                stream.cancel()
            if failure is not None:
                code = failure.code()
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise errors.DeadlineExceededError(
                        "watch of job %s: the timeout ran out; the job keeps running"
                        % self.id) from None
                if not ever_delivered or budget <= 0 or code not in _RETRYABLE:
                    raise _error(failure, self._client.address) from None
                why = failure.details() or code.name
            else:
                if not ever_delivered or budget <= 0:
                    raise errors.UnavailableError(
                        "the coordinator ended the watch of job %s before the job ended" % self.id)
                why = "the stream ended before the job did"
            now = time.monotonic()
            if lost_at is None:
                lost_at = now
            left_budget = lost_at + budget - now
            if left_budget <= 0:
                raise errors.UnavailableError(
                    "lost the coordinator at %s (%s) and gave up reconnecting after %.0f s; job "
                    "%s may still be running: Client.job(%r).watch() follows it again"
                    % (self._client.address, why, budget, self.id, self.id))
            attempt += 1
            delay = min(_BACKOFF_INITIAL_S * 2 ** (attempt - 1), _BACKOFF_MAX_S)
            delay = min(delay * random.uniform(1 - _BACKOFF_JITTER, 1 + _BACKOFF_JITTER),
                        left_budget)
            if now + delay >= deadline:
                raise errors.DeadlineExceededError(
                    "lost the coordinator at %s (%s) and the watch's timeout ran out; job %s "
                    "may still be running" % (self._client.address, why, self.id))
            log.warning("autoaccel: lost the coordinator at %s (%s); reconnecting in %.1f s "
                        "(attempt %d)", self._client.address, why, delay, attempt)
            time.sleep(delay)

    def wait(self, *, timeout: Optional[Seconds] = None,
             reconnect_for: Optional[Seconds] = None) -> JobInfo:
        """Follows the job to its end (as `watch`) and returns it as it ended:
        `state`, `best` (None if no trial succeeded), `status_message`."""
        for _ in self.watch(timeout=timeout, reconnect_for=reconnect_for):
            pass
        return self.refresh()

    def trials(self, *, include_pruned: bool = False) -> List[Trial]:
        """The job's trials (`Client.trials`)."""
        return self._client.trials(self, include_pruned=include_pruned)

    def cancel(self) -> JobInfo:
        """Cancels the job (running trials are stopped; the best so far stays);
        returns the job as the coordinator answered."""
        self.info = self._client.cancel(self.id)
        return self.info


JobRef = Union[Job, JobInfo, str]


def _job_id(job: JobRef) -> str:
    if isinstance(job, Job):
        return job.id
    if isinstance(job, JobInfo):
        return job.job_id
    return job


class Client:
    """A connection to an autoaccel coordinator.

    `address`: HOST:PORT of `autoaccel-server` (default $AUTOACCEL_SERVER, else
    127.0.0.1:50051). Credentials as the CLI's: `token` (else `token_file`,
    $AUTOACCEL_TOKEN, $AUTOACCEL_TOKEN_FILE, ~/.config/autoaccel/token) is
    sent as a bearer token with every call; `tls_ca` (else $AUTOACCEL_TLS_CA),
    a PEM file of CA certificates: connect over TLS trusting them (otherwise
    plaintext). `timeout`: seconds each call waits for its answer (a watch
    has its own). Every method asks the coordinator, `export` and `estimate`
    included (it computes them; nothing runs), so no `autoaccel` CLI is
    needed.

    Nothing connects until the first call. Use it as a context manager, or
    `close()` it.
    """

    def __init__(self, address: Optional[str] = None, *, token: Optional[str] = None,
                 token_file: Optional[PathLike] = None, tls_ca: Optional[PathLike] = None,
                 timeout: Seconds = DEFAULT_TIMEOUT_S):
        self.address = address or os.environ.get("AUTOACCEL_SERVER") or DEFAULT_SERVER
        self._token = _resolve_token(token, token_file)
        ca = tls_ca if tls_ca is not None else os.environ.get("AUTOACCEL_TLS_CA") or None
        self._tls_ca = os.path.abspath(os.fspath(ca)) if ca else None
        self.timeout = _seconds(timeout)
        # The channel retries the coordinator as often as a watch does.
        options = [("grpc.initial_reconnect_backoff_ms", int(_BACKOFF_INITIAL_S * 1000)),
                   ("grpc.min_reconnect_backoff_ms", int(_BACKOFF_INITIAL_S * 1000)),
                   ("grpc.max_reconnect_backoff_ms", int(_BACKOFF_MAX_S * 1000))]
        if self._tls_ca:
            try:
                with open(self._tls_ca, "rb") as f:
                    roots = f.read()
            except OSError as e:
                raise errors.InvalidArgumentError("tls_ca %s: cannot read it (%s)"
                                                  % (self._tls_ca, e.strerror)) from None
            self._channel = grpc.secure_channel(
                self.address, grpc.ssl_channel_credentials(root_certificates=roots), options)
        else:
            self._channel = grpc.insecure_channel(self.address, options)
        self._stub = pb_grpc.TuningServiceStub(self._channel)
        self._metadata = (("authorization", "Bearer " + self._token),) if self._token else ()

    def __repr__(self) -> str:
        return "Client(%r%s)" % (self.address, ", tls" if self._tls_ca else "")

    def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout,
                                               metadata=self._metadata)
        except grpc.RpcError as e:
            raise _error(e, self.address) from None

    def _job_info(self, job_id: str) -> JobInfo:
        return from_message(JobInfo, self._call("GetJob", pb.GetJobRequest(job_id=job_id)))

    # ---- Jobs -----------------------------------------------------------------

    def tune(self, model: Optional[str] = None, *, config: Optional[Config] = None,
             seq_len: int, global_batch_size: int, time_limit: Seconds = 600,
             world_size: int = 1, device: str = "cpu", max_trials: int = 0,
             overrides: Sequence[str] = (), new_overrides: Sequence[str] = (),
             model_file: Optional[PathLike] = None, input_spec: str = "",
             launcher: str = "", algorithm: str = "auto", include: Strings = (), exclude: Strings = (),
             load_strategy: str = "", finetune: bool = False, warmup_steps: int = 0,
             measured_steps: int = 0, trial_timeout: Optional[Seconds] = None,
             min_measured_time: Optional[Seconds] = None, store_partial: bool = False,
             force: bool = False, confirm_tolerance: float = 0, proxy: str = "",
             **candidates: Union[Ints, Strings]) -> Job:
        """Submits a tuning job and returns it at once (`Job.watch` or
        `Job.wait` follow it); as `autoaccel tune --detach`, each argument
        its flag (docs/CLI.md).

        `model`: the family ("gpt2", "llama", "bert", "mixtral", ..., or
        "torchscript"); `config`: its config.json, as a path or a dict;
        `overrides` / `new_overrides`: "KEY=VALUE" edits of it;
        `model_file` and `input_spec` for torchscript. With `launcher` (a
        launcher of the workers: your own training script) the model is
        optional. Durations in seconds or as timedelta; `candidates`: the
        searched dimensions' lists, one keyword per SPACE_DIMENSIONS row
        (`tp_sizes`, `precisions`, `micro_batch_sizes`, ...; a keyword that
        is none raises TypeError naming them), given (like include/exclude)
        as sequences or comma-separated strings ("bf16,fp32"), an absent or
        empty list meaning every value the device supports;
        `confirm_tolerance` a fraction (0.03), as --confirm-tolerance; 0
        means the server's default; `proxy` as --proxy ("layers=2,world-size=4",
        "auto"). A job the strategy database already answers comes back
        SUCCEEDED at once with `info.answered_from` set (`force=True` tunes
        anyway). Raises InvalidArgumentError naming a bad field.
        """
        request = pb.TuneRequest(
            model=_model_spec(model, config, overrides, new_overrides, model_file, input_spec),
            seq_len=seq_len, global_batch_size=global_batch_size,
            time_limit_seconds=_seconds(time_limit), max_trials=max_trials,
            world_size=world_size, device_type=device,
            warmup_steps=warmup_steps, measured_steps=measured_steps,
            trial_timeout_seconds=_seconds(trial_timeout),
            **_candidate_lists(candidates), algorithm=algorithm, include=_strings(include), exclude=_strings(exclude),
            load_strategy=load_strategy, finetune=finetune, store_partial=store_partial,
            min_measured_seconds=_seconds(min_measured_time), force=force, launcher=launcher,
            confirm_tolerance=confirm_tolerance, proxy=proxy)
        job = self._call("SubmitJob", pb.SubmitJobRequest(request=request))
        return Job(self, from_message(JobInfo, job))

    def job(self, job_id: str) -> Job:
        """The job `job_id` (NotFoundError if there is none; PermissionDenied
        if it is another user's), to follow or cancel."""
        return Job(self, self._job_info(job_id))

    def jobs(self, limit: int = 0) -> List[JobInfo]:
        """Recent jobs, newest first (0 = 50; at most 500): yours, or every
        one for an admin. Their requests leave out the model's config."""
        reply = self._call("ListJobs", pb.ListJobsRequest(limit=limit))
        return [from_message(JobInfo, j) for j in reply.jobs]

    def cancel(self, job: JobRef) -> JobInfo:
        """Cancels the job; returns it as the coordinator answered."""
        reply = self._call("CancelJob", pb.CancelJobRequest(job_id=_job_id(job)))
        return from_message(JobInfo, reply)

    def trials(self, job: JobRef, *, include_pruned: bool = False,
               page_size: int = 0) -> List[Trial]:
        """Every trial of the job in proposal order, read page by page
        (`page_size` per request; 0 = the server's 1000). `include_pruned`:
        the PRUNED candidates too (attempt 0, with the reason)."""
        request = pb.ListTrialsRequest(job_id=_job_id(job), page_size=page_size,
                                       include_pruned=include_pruned)
        trials: List[Trial] = []
        while True:
            reply = self._call("ListTrials", request)
            trials.extend(from_message(Trial, t) for t in reply.trials)
            if not reply.next_page_token:
                return trials
            request.page_token = reply.next_page_token

    # ---- The strategy database and the pool -----------------------------------

    def best(self, model: str, *, config: Optional[Config] = None, seq_len: int,
             global_batch_size: int, world_size: int = 1, device: str = "cpu",
             overrides: Sequence[str] = (), new_overrides: Sequence[str] = (),
             model_file: Optional[PathLike] = None,
             input_spec: str = "") -> Optional[StrategyAnswer]:
        """The best strategy recorded for this model, sizes and device type
        (`autoaccel best`; runs nothing), or None when none is recorded."""
        request = pb.QueryStrategiesRequest(
            model=_model_spec(model, config, overrides, new_overrides, model_file, input_spec),
            seq_len=seq_len, global_batch_size=global_batch_size, world_size=world_size,
            device_type=device)
        reply = self._call("QueryStrategies", request)
        return from_message(StrategyAnswer, reply.answers[0]) if reply.answers else None

    def strategies(self, *, model_family: str = "", device: str = "",
                   limit: int = 0) -> List[StrategyAnswer]:
        """The strategy database's answers with their provenance, most recently
        stored first (0 = 100; at most 1000), filtered by model family and
        device type when given."""
        reply = self._call("ListStrategies", pb.ListStrategiesRequest(
            model_family=model_family, device_type=device, limit=limit))
        return [from_message(StrategyAnswer, a) for a in reply.answers]

    def workers(self) -> List[Worker]:
        """The registered workers, each device with the trial holding it.
        Logs a warning when the coordinator runs unprotected (--insecure)."""
        workers, token = [], ""
        while True:  # page after page: a large pool comes in answers of at most 2 MiB
            reply = self._call("ListWorkers", pb.ListWorkersRequest(page_token=token))
            workers.extend(from_message(Worker, w) for w in reply.workers)
            token = reply.next_page_token
            if not token:
                break
        if reply.coordinator_insecure:
            log.warning("autoaccel: the coordinator at %s runs unprotected: %s", self.address,
                        reply.coordinator_insecure)
        return workers

    def logs(self, trial: Union[str, Trial, JobRef], index: Optional[int] = None, *,
             rank: int = 0, tail: int = 0) -> TrialLogs:
        """One rank's log files (stderr, stdout, the trial runner's output,
        metrics lines) from the worker that ran it (`autoaccel logs`): a
        trial (its id or a `Trial`), or a job and the trial's `index`.
        `tail`: the last lines of each file (0: 100, at most 10000).

        Raises NotFoundError for an unknown trial, FailedPreconditionError
        for one that never ran or whose worker left the pool,
        PermissionDeniedError for another user's job, and the worker's
        NotFoundError when the rank's directory was removed.
        """
        request = pb.GetTrialLogsRequest(rank=rank, tail_lines=tail)
        if index is not None:
            request.job_id = _job_id(trial)
            request.index = index
        elif isinstance(trial, Trial):
            request.trial_id = trial.trial_id
        else:
            request.trial_id = trial
        return from_message(TrialLogs, self._call("GetTrialLogs", request))

    # ---- Computed by the coordinator, nothing runs ---------------------------

    def export(self, job: Optional[JobRef] = None, *, format: Optional[str] = None,
               strategy: Optional[str] = None, world_size: int = 0,
               global_batch_size: int = 0, seq_len: int = 0, model: Optional[str] = None,
               config: Optional[Config] = None, overrides: Sequence[str] = (),
               devices_per_node: int = 0, out_dir: Optional[PathLike] = None) -> ExportResult:
        """A strategy as a training framework's configuration, computed by
        the coordinator (TuningService.Export, what `autoaccel export --json`
        prints; no CLI needed).

        Either a job's best strategy (`job`; `format` defaults to its
        launcher's) or `strategy` text with `world_size`, `global_batch_size`
        and `seq_len` (`model` with `config` adds the model's flags).
        `format`: deepspeed, hf-trainer, accelerate, megatron, torchtitan,
        lightning, atorch, colossalai, flagai, torch, torchrun, torchrun:F.
        `out_dir`: also write the files there (created; an existing file is
        never replaced).

        Raises NoStrategyError when the job has no best yet,
        ExportRejectedError when the framework refuses the strategy (its
        `result` has the fidelity rows), InvalidArgumentError for bad input,
        and the coordinator's errors for the job (NotFoundError, ...).
        """
        if job is None and not strategy:
            raise errors.InvalidArgumentError("export needs a job or strategy= text")
        request = pb.ExportRequest(
            job_id=_job_id(job) if job is not None else "", strategy=strategy or "",
            world_size=world_size, global_batch_size=global_batch_size, seq_len=seq_len,
            format=format or "", devices_per_node=devices_per_node)
        if model:
            request.model.CopyFrom(_model_spec(model, config, overrides, (), None, ""))
        try:
            reply = self._call("Export", request)
        except errors.FailedPreconditionError as e:  # the job has no best yet
            raise errors.NoStrategyError(str(e)) from None
        result = from_json(ExportResult, json.loads(reply.result_json))
        if result.rejected:
            rows = ["%s=%s: %s" % (r.dimension, r.value, r.note) for r in result.fidelity
                    if r.status == "rejected"]
            raise errors.ExportRejectedError("%s rejects this strategy (%s); nothing written"
                                             % (result.format, "; ".join(rows)), result)
        if out_dir is not None:
            _write_new_files(os.fspath(out_dir), result.files)
        return result

    def estimate(self, model: str, *, config: Config, seq_len: int, global_batch_size: int,
                 device: str = "", world_size: int = 0, strategy: Optional[str] = None,
                 top: int = 0, devices_per_node: int = 0, overrides: Sequence[str] = (),
                 new_overrides: Sequence[str] = (),
                 device_catalog: Optional[PathLike] = None,
                 precisions: Sequence[str] = (), tokens: int = 0,
                 price_per_gpu_hour: float = 0.0, world_sizes: Sequence[int] = (),
                 devices: Sequence[str] = (), deadline_seconds: float = 0.0,
                 budget: float = 0.0, safe_margin: Optional[float] = None) -> Estimate:
        """Will a strategy fit, and how fast will it go, on `world_size`
        devices of a catalog type (`device`, e.g. "h100-sxm") — the cost
        model's priors, computed by the coordinator (TuningService.Estimate,
        what `autoaccel estimate --json` prints; no GPU, no CLI needed).

        Give exactly one of `strategy` (canonical text; a missing ga= makes
        up the global batch) and `top` (the K fastest genuinely different
        options that fit, and the safe pick; none fitting gives an empty
        `strategies`). `device_catalog`: a JSON file of more devices.
        `precisions`: with `top`, the precisions ranked (e.g. ["pure_bf16",
        "fp8"]; default: as `autoaccel estimate`, fp8 only when listed).
        `tokens` (and a price, `price_per_gpu_hour` or the catalog's) adds
        the days and cost to train. `world_sizes` and `devices` instead of
        `world_size` and `device` sweep clusters (`clusters`), and
        `deadline_seconds` or `budget` choose one (`choice`); `safe_margin`
        (default 0.1) is the safe pick's share of free memory. Raises
        InvalidArgumentError for bad input (unknown device, unreadable
        config, a strategy the space refuses).
        """
        request = pb.EstimateRequest(
            model=_model_spec(model, config, overrides, new_overrides, None, ""),
            seq_len=seq_len, global_batch_size=global_batch_size, world_size=world_size,
            device=device, devices_per_node=devices_per_node, strategy=strategy or "", top=top,
            precisions=list(precisions), tokens=tokens, price_per_gpu_hour=price_per_gpu_hour,
            world_sizes=list(world_sizes), devices=list(devices),
            deadline_seconds=deadline_seconds, budget=budget)
        if safe_margin is not None:
            request.safe_margin = safe_margin
        if device_catalog is not None:
            path = os.fspath(device_catalog)
            try:
                with open(path, encoding="utf-8") as f:
                    request.device_catalog_json = f.read()
            except OSError as e:
                raise errors.InvalidArgumentError("device_catalog %s: cannot read it (%s)"
                                                  % (path, e.strerror)) from None
            request.device_catalog_name = path
        reply = self._call("Estimate", request)
        return from_json(Estimate, json.loads(reply.result_json))


def _write_new_files(out_dir: str, files: Mapping[str, str]) -> None:
    """Writes each file under `out_dir` (created), refusing to replace one."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise errors.InvalidArgumentError("out_dir %s: cannot create it (%s)"
                                          % (out_dir, e.strerror)) from None
    for name in files:
        if os.path.exists(os.path.join(out_dir, name)):
            raise errors.InvalidArgumentError("out_dir: %s exists; an export never replaces a "
                                              "file" % os.path.join(out_dir, name))
    for name, content in files.items():
        path = os.path.join(out_dir, name)
        try:
            with open(path, "x", encoding="utf-8") as f:
                f.write(content)
        except FileExistsError:
            raise errors.InvalidArgumentError("out_dir: %s exists; an export never replaces a "
                                              "file" % path) from None
        except OSError as e:
            raise errors.InvalidArgumentError("out_dir: cannot write %s (%s)"
                                              % (path, e.strerror)) from None
