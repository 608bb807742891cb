#!/usr/bin/env python3
"""Every header of server/ (and its wings) has its room in docs/ARCHITECTURE.md.

The section "The coordinator's rooms" lists each file by name in backticks:
`settle.{h,cc}`, `http/http_endpoint.{h,cc}`, or a pattern such as
`store*.{h,cc}` inside the `store/` row. Prints each header no row names and
exits 1 if there is one; also each backticked .h/.{h,cc} name that matches no
file (a room for a file that is gone).

Usage: check_server_rooms.py REPO_ROOT
"""
import fnmatch
import pathlib
import re
import sys


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    doc = (root / "docs" / "ARCHITECTURE.md").read_text()
    start = doc.index("### The coordinator's rooms")
    end = doc.index("\n## ", start)
    section = doc[start:end]
    patterns = []
    for token in re.findall(r"`([^`\s]+)`", section):
        token = token.replace(".{h,cc}", ".h")
        folder = token.split("/")[0] if "/" in token else ""
        if token.endswith(".h") and (not folder or (root / "server" / folder).is_dir()):
            patterns.append(token)  # another folder's file is named in passing
    headers = sorted(p.relative_to(root / "server").as_posix()
                     for p in (root / "server").rglob("*.h"))
    missing = [h for h in headers
               if not any(fnmatch.fnmatch(h, p) or fnmatch.fnmatch(h.rsplit("/", 1)[-1], p)
                          for p in patterns)]
    gone = [p for p in patterns
            if not any(fnmatch.fnmatch(h, p) or fnmatch.fnmatch(h.rsplit("/", 1)[-1], p)
                       for h in headers)]
    for h in missing:
        print(f"server/{h}: no row of docs/ARCHITECTURE.md's \"The coordinator's rooms\" names it")
    for p in gone:
        print(f"docs/ARCHITECTURE.md names `{p}` among the coordinator's rooms: no such file")
    if not missing and not gone:
        print(f"{len(headers)} headers of server/, each with its room")
    return 1 if missing or gone else 0


if __name__ == "__main__":
    sys.exit(main())
