"""The fidelity tables of docs/CLI.md ("Export"), generated from the exporter
itself: for every format `autoaccel export --help` lists, each strategy of
PROBES is exported (the real CLI, no server) and every distinct (dimension,
value, status, note) row of their fidelity reports is one row of the format's
table. The docs hold each table between the markers
    <!-- fidelity-table:FORMAT -->  ...  <!-- end fidelity-table:FORMAT -->

  fidelity_tables.py --autoaccel BIN --check docs/CLI.md   exit 1 when a table differs
  fidelity_tables.py --autoaccel BIN --write docs/CLI.md   rewrite the tables in place

ctest `docs.export_fidelity_tables` runs --check (tests/export.cmake)."""

import argparse
import json
import re
import subprocess
import sys

from exports import STRATEGIES, sizes

# The parsers' strategies (exports.py) and more, so that every value of every
# dimension appears with the combinations that change a row's note (offload
# with and without ZeRO, sequence parallelism, interleaved pipelines, expert
# parallelism under FSDP).
PROBES = STRATEGIES + [
    "mbs=2,ga=1,precision=fp8,checkpoint=none,attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=1,tp=2,pp=1,sharding=none,sp=1,mbs=1,ga=2,precision=fp8,checkpoint=none,attention=sdpa,optimizer=fused_adamw,offload=none",
    "mbs=1,ga=1,precision=fp32,checkpoint=full,attention=math,optimizer=adamw,offload=none",
    "dp=2,tp=1,pp=1,sharding=zero1,mbs=4,ga=2,precision=pure_bf16,checkpoint=none,attention=sdpa,optimizer=adamw,offload=cpu",
    "dp=2,tp=1,pp=1,sharding=fsdp,mbs=1,ga=4,precision=fp32,checkpoint=selective,ckpt_pct=50,attention=math,optimizer=adamw,offload=none",
    "dp=2,tp=1,pp=1,sharding=none,mbs=1,ga=1,precision=fp32,checkpoint=none,attention=math,optimizer=adamw,offload=cpu",
    "dp=1,tp=2,pp=1,sp=1,mbs=1,ga=2,precision=pure_bf16,checkpoint=selective,attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=1,tp=1,pp=2,sharding=none,pp_schedule=interleaved,vpp=2,mbs=1,ga=4,precision=pure_bf16,checkpoint=full,attention=sdpa,optimizer=fused_adamw,offload=none",
    "dp=4,tp=1,pp=1,sharding=fsdp,ep=2,mbs=1,ga=2,precision=bf16,checkpoint=none,attention=sdpa,optimizer=fused_adamw,offload=none",
]


def formats(autoaccel):
    """The --format names `autoaccel export --help` lists (torchrun:F aside)."""
    text = subprocess.run([autoaccel, "export", "--help"], capture_output=True, text=True).stdout
    section = text[text.index("--format"):]
    names = re.findall(r"^\s{20,}([a-z][a-z0-9-]*): ", section, flags=re.M)
    assert names, "no formats found in `autoaccel export --help`"
    return names


def table(autoaccel, fmt):
    """The format's rows, in the fidelity report's dimension order, each
    dimension's values in order of first appearance."""
    rows, dimensions = {}, []
    for strategy in PROBES:
        world, batch = sizes(strategy)
        run = subprocess.run([autoaccel, "export", "--strategy", strategy, "--world-size",
                              str(world), "--global-batch-size", str(batch), "--seq-len", "512",
                              "--format", fmt, "--json"], capture_output=True, text=True)
        assert run.returncode in (0, 2), (fmt, strategy, run.returncode, run.stderr)
        for r in json.loads(run.stdout)["fidelity"]:
            if r["dimension"] not in dimensions:
                dimensions.append(r["dimension"])
            key = (r["value"], r["status"], r["note"])
            rows.setdefault(r["dimension"], [])
            if key not in rows[r["dimension"]]:
                rows[r["dimension"]].append(key)

    def cell(text):
        return text.replace("|", "\\|").replace("\n", " ") or "-"

    def order(value):
        return (0, int(value), "") if value.isdigit() else (1, 0, value)

    lines = ["| dimension | values | status | how |", "| --- | --- | --- | --- |"]
    for d in dimensions:
        # The values that share a status and a note make one row.
        groups = {}
        for value, status, note in rows[d]:
            groups.setdefault((status, note), []).append(value)
        for (status, note), values in groups.items():
            shown = ", ".join(sorted(set(values), key=order))
            lines.append(f"| {d} | {cell(shown)} | {status} | {cell(note)} |")
    return "\n".join(lines)


def block(fmt, body):
    return (f"<!-- fidelity-table:{fmt} (generated: tests/export/fidelity_tables.py --write) -->\n"
            f"{body}\n<!-- end fidelity-table:{fmt} -->")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--autoaccel", required=True)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check")
    mode.add_argument("--write")
    args = parser.parse_args()
    path = args.check or args.write
    with open(path) as f:
        doc = f.read()
    stale = []
    for fmt in formats(args.autoaccel):
        pattern = re.compile(r"<!-- fidelity-table:%s .*?-->\n.*?<!-- end fidelity-table:%s -->"
                             % (re.escape(fmt), re.escape(fmt)), re.S)
        if not pattern.search(doc):
            stale.append(f"{fmt}: no table in {path}")
            continue
        want = block(fmt, table(args.autoaccel, fmt))
        if pattern.search(doc).group(0) != want:
            stale.append(f"{fmt}: the table differs from the exporter's rows")
            doc = pattern.sub(lambda _: want, doc)
    if args.write:
        with open(path, "w") as f:
            f.write(doc)
        print(f"{path}: {len(stale)} table(s) rewritten")
        for line in stale:
            print("  " + line)
        return
    for line in stale:
        print(line)
    if stale:
        print(f"{path}: out of date; run tests/export/fidelity_tables.py --autoaccel BIN --write {path}")
        sys.exit(1)
    print(f"{path}: every format's fidelity table matches the exporter")


if __name__ == "__main__":
    main()
