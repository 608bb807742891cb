#!/bin/sh
# Runs one fuzz target on a copy of its seed corpus, failing on any crash,
# sanitizer report, invariant failure, leak or input slower than 10 s:
#   run_target.sh TARGET SEED_DIR WORK_DIR [libFuzzer flags...]
# New inputs go to WORK_DIR/corpus (the checked-in seeds stay as they are),
# a failing input to WORK_DIR/crash-<sha1> (the log names it).
set -eu
target=$1 seeds=$2 work=$3
shift 3
rm -rf "$work"
mkdir -p "$work/corpus"
exec "$target" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$@" "$work/corpus" "$seeds"
