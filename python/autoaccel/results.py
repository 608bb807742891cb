"""What the client returns: plain, immutable dataclasses.

Those read from the coordinator mirror proto/autoaccel.proto's messages field
for field, with the same names (the field comments there say what each
means): `Job` → `JobInfo` (the `Job` class of the client is the handle of a
submitted job), and `Strategy`, `TrialMetrics`, `Prediction`, `ProxyMeasurement`, `Trial`,
`PrunedSummary`, `StrategyStanding`, `JobEvent`, `StrategyAnswer`, `Launcher`,
`PeakTflops`, `Device`, `Worker` under their own names. A message field the server left
unset is None; `strategy_json` is the parsed JSON object. `JobInfo.request` is
the request as the server stored it, in protobuf's JSON form (a dict, proto
field names, fields at their zero value left out).

Those of `export` and `estimate` mirror the CLI's `--json` documents
(docs/CLI.md): `ExportResult` with its `FidelityRow`s and `ArchitectureRow`s,
`Estimate` with its `StrategyEstimate`s, `MemoryEstimate`s, `CommunicationEstimate`s and
`RuledOut` kinds.

Standard library only: importable without grpcio.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

# Job and trial states (Job.state, Trial.status).
TERMINAL_JOB_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


@dataclass(frozen=True)
class Strategy:
    """One point of the search space; `text` is its canonical text form."""
    micro_batch_size: int
    grad_accum_steps: int
    precision: str
    checkpointing: str
    attention: str
    checkpoint_percent: int
    optimizer: str
    offload: str
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    sharding: str
    pipeline_schedule: str
    virtual_stages: int
    sequence_parallel: bool
    context_parallel: int
    context_parallel_comm: str
    expert_parallel: int
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class TrialMetrics:
    """What a trial measured (seconds, bytes, TFLOP/s; mfu a fraction)."""
    measured_steps: int
    step_time_median_s: float
    step_time_min_s: float
    step_time_max_s: float
    tokens_per_second: float
    samples_per_second: float
    achieved_tflops: float
    peak_memory_bytes: int
    peak_rss_bytes: int
    final_loss: float
    mfu: float
    peak_tflops: float
    skipped_steps: int
    comm_time_s: float
    rank_peak_memory_bytes: List[int]
    state_memory_bytes: int
    step_time_spread: float
    # The step times spread too widely to trust the figure much (derived).
    noisy: bool


@dataclass(frozen=True)
class Prediction:
    """The cost model's figures for a strategy when the job proposed it."""
    step_time_s: float
    peak_memory_bytes: int
    tokens_per_second: float


@dataclass(frozen=True)
class ProxyMeasurement:
    """What a proxy trial (tune's `proxy`) ran and measured; the trial's
    metrics are the full run's, extrapolated from it, with this interval."""
    proxy: str
    strategy_text: str
    measured: Optional[TrialMetrics]
    step_time_low_s: float
    step_time_high_s: float
    relative_uncertainty: float


@dataclass(frozen=True)
class Trial:
    """One trial of a job. `status`: PENDING, RUNNING, SUCCEEDED, OOM, FAILED,
    TIMEOUT, PRUNED or CANCELLED; times in unix seconds (0: not yet)."""
    trial_id: str
    job_id: str
    index: int
    attempt: int
    strategy: Optional[Strategy]
    strategy_json: Dict[str, Any]
    status: str
    reason: str
    metrics: Optional[TrialMetrics]
    worker_ids: List[str]
    started_at: float
    finished_at: float
    failed_attempts: List[str]
    infrastructure: bool
    confirms: str
    predicted: Optional[Prediction]
    proxy: Optional[ProxyMeasurement]
    full_size: bool


@dataclass(frozen=True)
class PrunedSummary:
    """Candidates ruled out without running, by kind of reason."""
    kind: str
    count: int
    example: Optional[Trial]


@dataclass(frozen=True)
class Launcher:
    """A launcher (the user's training script) as the workers advertise it."""
    name: str
    format: str
    dimensions: List[str]


@dataclass(frozen=True)
class StrategyAnswer:
    """An answer of the strategy database, with its provenance."""
    signature: str
    strategy: Optional[Strategy]
    strategy_json: Dict[str, Any]
    metrics: Optional[TrialMetrics]
    job_id: str
    updated_at: float
    hardware: str
    engine_version: str
    created_at: float
    model_family: str
    seq_len: int
    global_batch_size: int
    confirmed: bool
    # How sure the job that stored it was: "settled", "tie" or "provisional"
    # ("" for answers stored before this was recorded), its figure (tokens/s,
    # the mean of its kept measurements) with the 95% interval, the spread
    # and number of its measurements, and a tie's other strategies.
    certainty: str
    figure: float
    interval_low: float
    interval_high: float
    spread: float
    measurements: int
    tied_with: List[str]
    # The model's parameters, from its stored config (0: unknown).
    parameters: int


@dataclass(frozen=True)
class StrategyStanding:
    """One measured strategy of a job, by the rules its answer is chosen
    by: its figure (tokens/s, the mean of its kept measurements) with the 95%
    interval, the spread and number of its measurements, whether they agree,
    its trials' indices (the first, then its repeats), and whether it is the
    answer."""
    strategy_text: str
    figure: float
    interval_low: float
    interval_high: float
    spread: float
    measurements: int
    agrees: bool
    trial_indices: List[int]
    peak_memory_bytes: int
    answer: bool


@dataclass(frozen=True)
class JobInfo:
    """A job as the coordinator knows it now. `state`: QUEUED,
    WAITING_FOR_WORKERS, RUNNING, SUCCEEDED, FAILED or CANCELLED."""
    job_id: str
    state: str
    status_message: str
    request: Dict[str, Any]
    signature: str
    created_at: float
    started_at: float
    finished_at: float
    deadline: float
    trials_total: int
    trials_done: int
    trials_running: int
    best: Optional[Trial]
    elapsed_seconds: float
    algorithm: str
    trials_pruned: int
    infrastructure_failures: int
    trials_lost: int
    infrastructure_reasons: List[str]
    partial_evidence: bool
    pruned_summary: List[PrunedSummary]
    best_confirmed: bool
    best_spread: float
    best_measurements: int
    # "settled", "tie" or "provisional" (docs/CLI.md, "Confirmations"); the
    # answer's figure (tokens/s) and 95% interval; a tie's other strategies.
    best_certainty: str
    best_figure: float
    best_interval_low: float
    best_interval_high: float
    best_tied_with: List[str]
    answered_from: Optional[StrategyAnswer]
    launcher: Optional[Launcher]
    owner: str
    # Every strategy that can answer, fastest figure first.
    standings: List[StrategyStanding]

    @property
    def terminal(self) -> bool:
        """Whether the job has ended (SUCCEEDED, FAILED or CANCELLED)."""
        return self.state in TERMINAL_JOB_STATES


@dataclass(frozen=True)
class JobEvent:
    """One step of a watch: the job now, and the trials that changed since the
    previous event (the first events of a watch: every trial so far)."""
    job: JobInfo
    trials: List[Trial]


@dataclass(frozen=True)
class PeakTflops:
    """Dense peak TFLOP/s of a device by precision; 0 = unknown."""
    fp32: float
    bf16: float
    fp16: float
    fp8: float  # 0 on a device without fp8 tensor cores


@dataclass(frozen=True)
class Device:
    """A device of a worker; `held_by_trial` is "" when free."""
    type: str
    index: int
    memory_bytes: int
    name: str
    held_by_trial: str
    peak_tflops: Optional[PeakTflops]
    ordinal: int


@dataclass(frozen=True)
class Worker:
    """A registered worker daemon and its devices."""
    worker_id: str
    address: str
    devices: List[Device]
    healthy: bool
    last_seen: float
    registered_at: float
    rendezvous_port_min: int
    rendezvous_port_max: int
    host_cpu_cores: int
    host_memory_bytes: int
    warnings: List[str]
    launchers: List[Launcher]
    tls: bool
    insecure: str
    # How much one small CPU kernel's time varies run to run on its machine
    # ((p90 - p10) / median; 0: not reported).
    timing_jitter: float


@dataclass(frozen=True)
class RankLogFile:
    """One of a rank's log files: its last lines as written (`tail`, bytes;
    `text` decodes them), the whole file's size, and whether earlier lines
    were left out."""
    name: str
    tail: bytes
    size_bytes: int
    truncated: bool

    @property
    def text(self) -> str:
        return self.tail.decode("utf-8", "replace")


@dataclass(frozen=True)
class RankLogs:
    """A rank's directory on its worker and the log files in it
    (stderr.log, stdout.log, trial.log, metrics.jsonl: those that exist);
    `running`: the rank has not ended yet."""
    directory: str
    files: List[RankLogFile]
    running: bool


@dataclass(frozen=True)
class TrialLogs:
    """One rank of a trial's last attempt, from the worker that ran it
    (`autoaccel logs`)."""
    trial_id: str
    attempt: int
    rank: int
    worker_id: str
    logs: Optional[RankLogs]


# ---- The CLI's documents (export, estimate) ---------------------------------


@dataclass(frozen=True)
class FidelityRow:
    """How one strategy dimension carries over to the framework: `status` is
    "exact", "approximated", "not_expressible" or "rejected"."""
    dimension: str
    value: str
    status: str
    note: str


@dataclass(frozen=True)
class ArchitectureRow:
    """How one feature of the model carries over to a format that builds the
    network from flags of its own (megatron): `status` is "exact",
    "approximated" or "not_expressible"."""
    feature: str
    value: str
    status: str
    note: str


@dataclass(frozen=True)
class ExportResult:
    """A strategy as a framework's configuration: `files` by name, the launch
    `command`, and the fidelity report (`architecture`: the model's features,
    for megatron with a model; empty otherwise)."""
    format: str
    files: Dict[str, str]
    command: str
    fidelity: List[FidelityRow]
    rejected: bool
    nnodes: int
    nproc_per_node: int
    architecture: List[ArchitectureRow] = field(default_factory=list)


@dataclass(frozen=True)
class MemoryEstimate:
    """Predicted bytes per device (worst rank), by kind, and their total."""
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    logits: int
    gathered_shards: int
    fp8_weight_copies: int  # fp8: the layers' 1-byte weight copies kept for backward
    overhead: int
    total: int


@dataclass(frozen=True)
class CommunicationEstimate:
    """Bytes one device sends per step: data-parallel (gradients, shards over
    the data- and context-parallel ranks) and model-parallel (tensor,
    context, expert and pipeline messages), the latter also by dimension."""
    data_parallel_bytes: float
    model_parallel_bytes: float
    tensor_parallel_bytes: float = 0.0
    context_parallel_bytes: float = 0.0
    expert_parallel_bytes: float = 0.0
    pipeline_parallel_bytes: float = 0.0


@dataclass(frozen=True)
class TrainingCost:
    """Days (and, with a price, cost) to train the request's tokens at a
    strategy's predicted tokens/s, with the band's ends (docs/CLI.md, "Time
    and cost to train")."""
    days: float
    days_fast: float
    days_slow: float
    price_per_gpu_hour: Optional[float] = None  # the rest only with a price
    cost: Optional[float] = None
    cost_low: Optional[float] = None
    cost_high: Optional[float] = None


@dataclass(frozen=True)
class StrategyEstimate:
    """The cost model's answer for one strategy (priors, not measurements)."""
    strategy: str
    strategy_json: Dict[str, Any]
    fits: bool
    device_memory_bytes: int
    margin_bytes: int
    margin_fraction: float
    memory: MemoryEstimate
    step_time_s: float
    tokens_per_second: float
    model_flops_per_step: float
    mfu: float
    communication: Optional[CommunicationEstimate] = None
    why_not: str = ""  # set when it does not fit
    training: Optional[TrainingCost] = None  # with tokens


@dataclass(frozen=True)
class RuledOut:
    """Candidates of `estimate(top=K)` ruled out, by kind, with an example."""
    kind: str
    count: int
    example: str
    example_reason: str


@dataclass(frozen=True)
class ClusterEstimate:
    """One cluster of a sweep: a catalog device and a world size, its fastest
    option and its safe pick (None: none), or `error` when its space has no
    candidate."""
    device: str
    world_size: int
    devices_per_node: int
    candidates: Optional[int] = None
    fitting: Optional[int] = None
    groups: Optional[int] = None
    fastest: Optional[StrategyEstimate] = None
    safe: Optional[StrategyEstimate] = None
    error: str = ""


@dataclass(frozen=True)
class Estimate:
    """`estimate`'s answer: the catalog device (as a dict, docs/CLI.md), the
    model's family and parameter count, and the strategies estimated (the
    fastest genuinely different options that fit, with `top`).
    `candidates`, `fitting`, `groups`, `safe` and `ruled_out` come with
    `top` only. A sweep (several world sizes or devices, a deadline or a
    budget) has `clusters` and `choice` instead of the device, world size
    and strategies."""
    model: Dict[str, Any]
    seq_len: int
    global_batch_size: int
    device: Optional[Dict[str, Any]] = None
    devices_per_node: Optional[int] = None
    world_size: Optional[int] = None
    strategies: List[StrategyEstimate] = field(default_factory=list)
    candidates: Optional[int] = None
    fitting: Optional[int] = None
    groups: Optional[int] = None
    safe_margin: Optional[float] = None
    safe: Optional[StrategyEstimate] = None
    ruled_out: List[RuledOut] = field(default_factory=list)
    tokens: Optional[int] = None
    training_band: Optional[Dict[str, Any]] = None
    clusters: List[ClusterEstimate] = field(default_factory=list)
    # {"rule", "deadline_days" or "budget", "cluster": index into clusters or None}
    choice: Optional[Dict[str, Any]] = None
