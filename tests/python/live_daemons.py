"""The live-cluster tests' processes: a daemon (autoaccel-server,
autoaccel-worker, chromedriver) with its output in a log file that is
searched for what it prints, and the e2e tests' tiny model.

Standard library only: imported by tests/python/test_client.py (run by the
client's fresh virtual environment) and tests/dashboard/check_dashboard.py.
"""

import os
import re
import socket
import subprocess
import time

# The e2e tests' model (tests/e2e_cluster.h): two layers of 32.
TINY_GPT2 = {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 64,
             "n_positions": 32}


def free_port():
    """A loopback port nobody listens on now, for a worker's rendezvous range
    (a world-size-1 trial never binds it; a gang may lose it to a race)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """A process with its stdout and stderr in DIR/NAME.log."""

    def __init__(self, argv, directory, name):
        self.name = name
        self.log = os.path.join(directory, name + ".log")
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=directory)

    def wait_for(self, pattern, timeout=20.0):
        """The first match of `pattern` in the log; AssertionError (with the
        log's end) when the process exits or `timeout` passes without one."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                m = re.search(pattern, f.read())
            if m:
                return m
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError("%s printed no /%s/ (log %s):\n%s"
                             % (self.name, pattern, self.log, self.output()))

    def address(self, timeout=20.0):
        """HOST:PORT of its first "listening on" line."""
        return self.wait_for(r"listening on (\S+)", timeout).group(1)

    def output(self):
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()[-4000:]

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
