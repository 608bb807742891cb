"""What bench/api_fuzz.py and bench/load.py share: their own virtual
environment, Python stubs of proto/autoaccel.proto generated at run time, and
real daemons started from a binaries' directory.

  ensure_venv()        re-executes the calling script with the Python of
                       build/bench-venv (created, with bench/requirements.txt
                       installed by pip, when missing or out of date), so a
                       user runs one command with any python3 3.9+. The
                       folder can be moved with $AUTOACCEL_BENCH_VENV.
  load_stubs(tmp)      grpc_tools.protoc of proto/autoaccel.proto into tmp;
                       returns (autoaccel_pb2, autoaccel_pb2_grpc). Nothing
                       generated is kept in the tree.
  cpu_seconds(pid)     a process's user + system CPU seconds so far.
  Daemon               a started process with its log file, its RSS and peak
                       RSS (/proc/PID/status), and a graceful stop.
  start_server(...)    an autoaccel-server on 127.0.0.1:0 with its own
                       database; the port is read from its first line.
"""
import hashlib
import os
import re
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIREMENTS = os.path.join(REPO, "bench", "requirements.txt")


def ensure_venv():
    """Runs the caller under build/bench-venv's Python (re-exec), creating it first."""
    venv = os.environ.get("AUTOACCEL_BENCH_VENV", os.path.join(REPO, "build", "bench-venv"))
    python = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    with open(REQUIREMENTS, "rb") as f:
        wanted = hashlib.sha256(f.read()).hexdigest()
    stamp = os.path.join(venv, "requirements.sha256")
    have = open(stamp).read().strip() if os.path.exists(stamp) else ""
    if not os.path.exists(python) or have != wanted:
        print(f"[bench] creating {venv} (pip install -r {REQUIREMENTS})", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "-r", REQUIREMENTS], check=True)
        with open(stamp, "w") as f:
            f.write(wanted + "\n")
    os.execv(python, [python] + sys.argv)


def load_stubs(tmp):
    """Generates autoaccel_pb2{,_grpc}.py into tmp and imports them."""
    from grpc_tools import protoc  # noqa: the venv has it
    import grpc_tools

    os.makedirs(tmp, exist_ok=True)
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = ["protoc", f"-I{REPO}/proto", f"-I{include}", f"--python_out={tmp}",
            f"--grpc_python_out={tmp}", f"{REPO}/proto/autoaccel.proto"]
    if protoc.main(args) != 0:
        raise SystemExit("grpc_tools.protoc failed on proto/autoaccel.proto")
    sys.path.insert(0, tmp)
    import autoaccel_pb2
    import autoaccel_pb2_grpc

    return autoaccel_pb2, autoaccel_pb2_grpc


def rss_bytes(pid, key="VmRSS"):
    """The process's VmRSS (or VmHWM: its peak) in bytes; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_seconds(pid):
    """The process's user + system CPU time so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Daemon:
    def __init__(self, name, argv, log_path):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def rss(self):
        return rss_bytes(self.pid)

    def peak_rss(self):
        return rss_bytes(self.pid, "VmHWM")

    def wait_for_line(self, pattern, timeout=30.0):
        """The first match of `pattern` in the log (re.Match), waiting for it."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            with open(self.log_path, "rb") as f:
                m = re.search(pattern.encode(), f.read())
            if m:
                return m
            if not self.alive():
                break
            time.sleep(0.05)
        raise SystemExit(f"{self.name}: no line matching {pattern!r} in {self.log_path} "
                         f"(exit code {self.proc.poll()}):\n" + open(self.log_path).read()[-3000:])

    def stop(self, timeout=30.0):
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code."""
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def binary(bin_dir, name):
    path = os.path.join(bin_dir, name)
    if not os.access(path, os.X_OK):
        raise SystemExit(f"{path}: not found; build it (see docs/CONTRIBUTING.md) or pass --bin")
    return path


def start_server(bin_dir, tmp, extra=()):
    """An autoaccel-server on 127.0.0.1:0 with database tmp/server.db; returns (daemon, address)."""
    argv = [binary(bin_dir, "autoaccel-server"), "--listen", "127.0.0.1:0", "--db",
            os.path.join(tmp, "server.db"), "--log-level", "warn", *extra]
    server = Daemon("autoaccel-server", argv, os.path.join(tmp, "server.log"))
    m = server.wait_for_line(r"listening on (\S+:\d+)")
    return server, m.group(1).decode()


def mib(n):
    return f"{n / (1 << 20):.1f} MiB"
