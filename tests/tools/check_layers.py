#!/usr/bin/env python3
"""Each folder includes only the folders below it (docs/ARCHITECTURE.md).

LAYERS names, for every folder of the project's C++ code, the project
folders its files may include. Prints each `#include "folder/..."` of a
tracked .h, .cc or .cc.in file that its folder may not include, and each
top-level folder of tracked C++ code that the table lacks, and exits 1 if
there is one. (Build folders, tracked or not, are not the project's code.)

Usage: check_layers.py REPO_ROOT
"""
import pathlib
import re
import subprocess
import sys

# folder -> the project folders it may include (besides itself).
LAYERS = {
    "common": set(),
    # The vocabulary: strategies, models, trials, compatibility.
    "spec": {"common"},
    "search": {"common", "spec"},
    "export": {"common", "spec"},
    "trial_contract": {"common", "spec"},
    # The trial runner: no search, no gRPC.
    "engine": {"common", "spec", "trial_contract"},
    "proto": {"common", "spec", "search"},
    "report": {"common", "spec", "proto"},
    "offline": {"common", "spec", "search", "export", "proto"},
    "worker": {"common", "spec", "export", "proto", "trial_contract"},
    "server": {"common", "spec", "search", "export", "proto", "report", "offline",
               "trial_contract"},
    "client": {"common", "spec", "search", "export", "proto", "report", "offline"},
    "bench": {"common", "spec", "search", "proto"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.MULTILINE)


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    tracked = subprocess.run(["git", "-C", str(root), "ls-files", "*.h", "*.cc", "*.cc.in"],
                             capture_output=True, text=True, check=True).stdout.split()
    by_folder = {}
    for name in tracked:
        if "/" in name:
            by_folder.setdefault(name.split("/", 1)[0], []).append(root / name)
    problems = []
    for folder, files in sorted(by_folder.items()):
        if folder in ("tests", "python") or folder.startswith("."):
            continue
        if folder not in LAYERS:
            problems.append(f"{folder}/: C++ code in a folder check_layers.py's LAYERS lacks")
            continue
        for f in files:
            for used in INCLUDE.findall(f.read_text(errors="replace")):
                if used != folder and used in LAYERS and used not in LAYERS[folder]:
                    problems.append(f"{f.relative_to(root)}: includes {used}/, which {folder}/ "
                                    "may not (a lower layer includes a higher one)")
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
