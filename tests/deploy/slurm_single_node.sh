#!/usr/bin/env bash
# deploy/slurm/autoaccel.sbatch on a real one-node Slurm cluster started here:
# munged with a fresh key, slurmctld and slurmd (Debian's munge and slurm-wlm)
# from a minimal slurm.conf in a temporary directory, as root. The script must
# start the coordinator and a worker, wait for it, tune a tiny model on one cpu
# slot, export the answer and leave no daemon of the job behind.
#
#   slurm_single_node.sh BIN_DIR
#
# Exit 77 (skipped) without Slurm or munge, or when not root.
set -euo pipefail
bin=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
for tool in munged slurmctld slurmd sbatch scontrol sinfo; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found (apt-get install slurm-wlm munge; scripts/setup installs them)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: a private Slurm cluster needs root (slurmd runs jobs as their users)"; exit 77; }

tmp=$(mktemp -d /tmp/autoaccel-slurm.XXXXXX)
chmod 711 "$tmp"
export SLURM_CONF=$tmp/slurm.conf
stop() {
  for pidfile in "$tmp/slurmd.pid" "$tmp/slurmctld.pid"; do
    [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  munged --stop --socket="$tmp/munge.sock" >/dev/null 2>&1 || true
  sleep 0.5
  rm -rf "$tmp"
}
trap stop EXIT

dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 status=none
chmod 600 "$tmp/munge.key"
munged --force --socket="$tmp/munge.sock" --key-file="$tmp/munge.key" \
  --pid-file="$tmp/munged.pid" --log-file="$tmp/munged.log" --seed-file="$tmp/munged.seed"

# slurm.conf takes fixed ports: two the kernel has free now.
read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
mkdir -p "$tmp/state" "$tmp/spool"
cat >"$SLURM_CONF" <<EOF
ClusterName=autoaccel-test
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=localhost CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -i
slurmd -N localhost
for _ in $(seq 1 50); do
  sinfo -h -o %T 2>/dev/null | grep -qx idle && break
  sleep 0.2
done
sinfo -h -o %T | grep -qx idle || { echo "slurm did not come up:"; tail -n 20 "$tmp"/slurm*.log; exit 1; }

run=$tmp/run
start=$SECONDS
set +e
AUTOACCEL_BIN=$bin AUTOACCEL_RUN_DIR=$run AUTOACCEL_PORT=0 AUTOACCEL_WORKER_PORT=0 \
AUTOACCEL_DEVICES=cpu:1 AUTOACCEL_EXPORT_FORMAT=torchrun AUTOACCEL_REGISTER_TIMEOUT=60 \
  sbatch --parsable --nodes=1 --chdir="$repo" --output="$tmp/job.out" \
  "$repo/deploy/slurm/autoaccel.sbatch" \
  --model gpt2 --model-config "$repo/deploy/examples/gpt2-tiny.json" --seq-len 16 \
  --global-batch-size 2 --max-trials 2 --warmup-steps 1 --measured-steps 1 --time-limit 2m \
  >"$tmp/job.id"
set -e
slurm_job=$(cat "$tmp/job.id")
# (sbatch --wait polls with growing intervals, up to half a minute late.)
while squeue -h -j "$slurm_job" 2>/dev/null | grep -q .; do sleep 0.5; done
rc=$(scontrol show job "$slurm_job" | sed -n 's/.* ExitCode=\([0-9]*\):.*/\1/p')
echo "--- job output (batch job exit $rc, $((SECONDS - start)) s) ---"
cat "$tmp/job.out"
fail() {
  echo "FAIL: $*"
  for f in "$run"/logs/*; do echo "--- $f"; tail -n 20 "$f"; done
  exit 1
}
[ "$rc" -eq 0 ] || fail "the batch job exited $rc"
grep -q "1 worker(s) registered" "$tmp/job.out" || fail "no worker registration reported"
job=$(cat "$run/job.txt")
[ -n "$job" ] || fail "no job id"
ls "$run/answer"/* >/dev/null 2>&1 || fail "nothing exported to $run/answer"
echo "exported: $(ls "$run/answer")"
grep -q "autoaccel-server listening on 0.0.0.0:" "$run/logs/coordinator.out" || fail "no coordinator"
# Both daemons were stopped with SIGTERM (they shut down in order), not killed.
grep -q "signal 15: shutting down" "$run/logs/coordinator.out" || fail "the coordinator was not stopped with SIGTERM"
grep -q "signal 15: shutting down" "$run"/logs/worker-*.out || fail "the worker was not stopped with SIGTERM"
# Everything the job started is gone.
if pgrep -f "$run/" >/dev/null; then
  pgrep -af "$run/"
  fail "processes of the job still run after it ended"
fi
echo "PASS: job $job tuned, exported and shut down"
