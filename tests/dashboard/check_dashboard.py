#!/usr/bin/env python3
"""The coordinator's dashboard in a real headless browser: Debian's chromium
driven by its chromedriver over the W3C WebDriver protocol (plain HTTP,
spoken here with the standard library).

A real autoaccel-server (user tokens for alice and bob, the HTTP port on
127.0.0.1:0) and two real autoaccel-worker processes with one CPU slot
each; alice tunes the tiny GPT-2 model for a dozen trials. While it runs:
  - the API answers 401 without a token or with an unknown one, and bob
    neither sees alice's job in his list nor may open it (403);
  - the job page, opened once and given alice's token in its form, gains
    trial rows as trials finish without being reloaded, shows the three
    figures as SVG and the worker pool with a device held by a trial;
  - the job list at / shows the job with its state;
  - once the job has ended, the page and `autoaccel report --html` name the
    answer, its trial and its figure as `tune --json` does;
  - the browser's console has no error; a deliberately thrown one at the
    end must show up there, or the check could not see errors at all.

usage: check_dashboard.py SERVER WORKER CLI WORK_DIR [--screenshot FILE.png]
(the worker finds autoaccel-trial beside itself). --screenshot saves the
running job's page (docs/dashboard.png is made that way, by hand).
"""
import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
from live_daemons import TINY_GPT2, Daemon, free_port  # noqa: E402

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789"
TERMINAL = ("SUCCEEDED", "OOM", "FAILED", "TIMEOUT", "CANCELLED")


def fail(message):
    sys.exit("check_dashboard: FAIL: " + message)


def http(method, url, body=None, token=None, timeout=30):
    """(status, body bytes) of one request; HTTP errors are answers too."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token is not None:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


class Browser:
    """One chromedriver session of headless chromium."""

    def __init__(self, chromedriver, chromium, work):
        self.driver = Daemon([chromedriver, "--port=0"], work, "chromedriver")
        port = self.driver.wait_for(r"started successfully on port (\d+)").group(1)
        self.base = "http://127.0.0.1:%s" % port
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                         "--disable-dev-shm-usage", "--window-size=1400,1800",
                         "--user-data-dir=" + os.path.join(work, "profile")]},
            "goog:loggingPrefs": {"browser": "ALL"}}}}
        status, body, _ = http("POST", self.base + "/session", caps, timeout=60)
        if status != 200:
            fail("chromedriver did not start a session: %s %s" % (status, body[:2000]))
        self.session = json.loads(body)["value"]["sessionId"]

    def call(self, method, path, body=None):
        status, answer, _ = http(method, "%s/session/%s%s" % (self.base, self.session, path),
                                 body)
        value = json.loads(answer)["value"] if answer else None
        if status != 200:
            fail("WebDriver %s %s: %s %s" % (method, path, status, value))
        return value

    def go(self, url):
        self.call("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def element(self, css):
        found = self.call("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(found.values()))

    def console(self):
        """The browser's console entries since the last call."""
        return self.call("POST", "/se/log", {"type": "browser"})

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.call("GET", "/screenshot")))

    def quit(self):
        try:
            http("DELETE", "%s/session/%s" % (self.base, self.session), timeout=20)
        finally:
            self.driver.stop()


def until(what, predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    fail("timed out waiting for " + what)


def main():
    parser = argparse.ArgumentParser()
    for name in ("server", "worker", "cli", "work"):
        parser.add_argument(name)
    parser.add_argument("--screenshot")
    a = parser.parse_args()
    a.server, a.worker, a.cli = (os.path.abspath(p) for p in (a.server, a.worker, a.cli))
    chromium = shutil.which("chromium") or fail("no chromium on PATH (scripts/setup installs it)")
    chromedriver = shutil.which("chromedriver") or fail(
        "no chromedriver on PATH (Debian's chromium-driver; scripts/setup installs it)")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    work = os.path.abspath(a.work)
    tokens = os.path.join(work, "tokens")
    with open(os.open(tokens, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("%s alice\n%s bob\n" % (ALICE, BOB))
    join_token = os.path.join(work, "join-token")
    with open(os.open(join_token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("dashboard-join-token-0123456789\n")
    config = os.path.join(work, "tiny-gpt2.json")
    with open(config, "w") as f:
        json.dump(TINY_GPT2, f)

    daemons = []
    browser = None
    tune = None
    started = time.monotonic()
    try:
        server = Daemon([a.server, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
                         "--db", os.path.join(work, "autoaccel.db"), "--tokens", tokens,
                         "--join-token-file", join_token,
                         "--heartbeat-interval", "0.5"], work, "server")
        daemons.append(server)
        grpc_address = server.wait_for(r"autoaccel-server listening on (\S+)").group(1)
        web = "http://" + server.wait_for(r"http listening on (\S+)").group(1)
        for name in ("w1", "w2"):
            port = free_port()
            daemons.append(Daemon(
                [a.worker, "--coordinator", grpc_address, "--listen", "127.0.0.1:0",
                 "--devices", "cpu:1", "--id", name, "--threads-per-device", "1",
                 "--work-dir", work, "--rendezvous-ports", "%d-%d" % (port, port),
                 "--join-token-file", join_token,
                 "--peak-tflops", "fp32=0.1,bf16=0.4,fp16=0.01"], work, name))

        def api(path, token=ALICE):
            status, body, headers = http("GET", web + path, token=token)
            return status, (json.loads(body) if body.startswith(b"{") else body), headers

        until("two healthy workers", lambda: sum(
            w.get("healthy", False) for w in api("/api/workers")[1].get("workers", [])) == 2, 20)

        # The API's access rules, as the gRPC API's.
        for path in ("/api/jobs", "/api/workers", "/api/job?id=x"):
            status, body, headers = api(path, token=None)
            if status != 401 or "Bearer" not in headers.get("WWW-Authenticate", ""):
                fail("%s without a token answered %s %s" % (path, status, body))
            status, body, _ = api(path, token="not-a-token")
            if status != 401:
                fail("%s with an unknown token answered %s %s" % (path, status, body))
        status, body, headers = api("/job", token=None)
        csp = headers.get("Content-Security-Policy", "")
        if status != 200 or "default-src 'self'" not in csp or "unsafe-inline" in csp:
            fail("the job page: %s, Content-Security-Policy %r" % (status, csp))

        # The browser first (a second or two), so that it sees the job from its start.
        browser = Browser(chromedriver, chromium, work)
        # tune --json follows the job to its end and prints it: the answer the
        # page and the report must name. It says the job's id first, on stderr.
        tune = subprocess.Popen(
            [a.cli, "--server", grpc_address, "--token", ALICE, "--json", "tune", "--model",
             "gpt2", "--model-config", config, "--seq-len", "16", "--global-batch-size", "4",
             "--warmup-steps", "1", "--measured-steps", "1", "--min-measured-time", "200ms",
             "--max-trials", "12", "--time-limit", "90s", "--algorithm", "exhaustive",
             "--force"], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        tune_err = []
        first = tune.stderr.readline()
        tune_err.append(first)
        m = re.search(r"submitted job (job-[A-Za-z0-9-]+)", first)
        if not m:
            tune.kill()
            fail("tune: %s%s" % (first, tune.stderr.read()))
        job = m.group(1)
        tune_out = []
        readers = [threading.Thread(target=lambda: tune_err.extend(tune.stderr), daemon=True),
                   threading.Thread(target=lambda: tune_out.extend(tune.stdout), daemon=True)]
        for r in readers:
            r.start()

        status, body, _ = api("/api/jobs", token=BOB)
        if status != 200 or any(j["job_id"] == job for j in body.get("jobs", [])):
            fail("bob's job list: %s %s" % (status, body))
        for path in ("/api/job?id=" + job, "/api/job/figures?id=" + job):
            status, body, _ = api(path, token=BOB)
            if status != 403:
                fail("bob opened alice's job at %s: %s %s" % (path, status, body))

        browser.go("%s/job?id=%s" % (web, job))
        # No token yet: the page asks for one.
        until("the token form", lambda: browser.js(
            "return !document.getElementById('login').hidden;"), 10)
        field = browser.element("#token")
        browser.call("POST", "/element/%s/value" % field, {"text": ALICE})
        browser.call("POST", "/element/%s/click" % browser.element("#token-save"), {})
        browser.js("window.loadedOnce = 'yes';")  # gone if the page reloads
        # The only console entries allowed: the API's 401s before the token.
        for e in browser.console():
            if e.get("level") == "SEVERE" and not (
                    e.get("source") == "network" and "/api/" in e.get("message", "")
                    and "401" in e.get("message", "")):
                fail("the browser console has an error before the token: %s" % e)

        def finished_rows():
            return browser.js(
                "return Array.from(document.querySelectorAll('#trial-table tbody tr'))"
                ".filter(r => %s.includes(r.dataset.status)).length;" % json.dumps(TERMINAL))

        def held_devices():
            return browser.js(
                "return Array.from(document.querySelectorAll('#worker-table td[data-holder]'))"
                ".map(td => td.dataset.holder).filter(h => h !== '');")

        counts, holders, shot = [], set(), False
        end = time.monotonic() + 90
        while time.monotonic() < end:
            counts.append(finished_rows())
            holders.update(held_devices())
            state = browser.js("return document.getElementById('job-state').textContent;")
            if a.screenshot and not shot and state == "RUNNING" and counts[-1] >= 8:
                browser.screenshot(a.screenshot)
                shot = True
            if state in ("SUCCEEDED", "FAILED", "CANCELLED") and counts[-1] > 0:
                break
            time.sleep(0.25)
        else:
            fail("the job did not finish in 90 s: rows %s\n%s" % (counts[-5:], server.output()))
        growth = sorted(set(counts))
        print("finished rows seen: %s; devices held by %s" % (growth, sorted(holders)))
        if len(growth) < 3 or growth[-1] < 2:
            fail("the trial table did not grow while the page stayed open: %s" % growth)
        if browser.js("return window.loadedOnce;") != "yes":
            fail("the job page reloaded itself")
        if not holders or not all(h.startswith(job + "-") for h in holders):
            fail("the worker pool showed no device held by one of the job's trials: %s"
                 % sorted(holders))
        for section in ("throughput-memory", "best-over-time", "predicted-measured"):
            svgs = browser.js("return document.querySelectorAll('#figures #%s svg').length;"
                              % section)
            if not svgs:
                fail("figure %s has no SVG" % section)
        points = browser.js(
            "return document.querySelectorAll('#throughput-memory svg .dot').length;")
        if points < 2:
            fail("the throughput figure plots %s points" % points)

        # The page, the report and tune --json name the same answer.
        try:
            tune.wait(timeout=60)
        except subprocess.TimeoutExpired:
            tune.kill()
            fail("tune did not end with its job")
        for r in readers:
            r.join(10)
        out = "".join(tune_out)
        if tune.returncode != 0:
            fail("tune --json: exit %s\n%s" % (tune.returncode, "".join(tune_err)[-3000:]))
        best = json.loads(out)["best"]
        answer = next(s for s in json.loads(out)["standings"] if s["answer"])
        figure = "%.0f" % best["figure"]
        page = browser.js(
            "return {answer: document.getElementById('job-answer').textContent,"
            " best: document.getElementById('job-best').textContent,"
            " rows: Array.from(document.querySelectorAll('#trial-table tbody tr'))"
            "  .filter(r => / answer$/.test(r.cells[4].textContent))"
            "  .map(r => Number(r.dataset.status === 'SUCCEEDED' ? r.cells[0].textContent : -1))};")
        if not page["answer"].startswith("answer: " + best["strategy"] + " — "):
            fail("the page's answer %r is not tune's %r" % (page["answer"], best["strategy"]))
        if page["best"] != figure or (figure + " tokens/s") not in page["answer"]:
            fail("the page's figure %r / %r is not tune's %s" % (page["best"], page["answer"],
                                                                 figure))
        if best["index"] not in page["rows"] or sorted(page["rows"]) != answer["trial_indices"]:
            fail("the page marks trials %s as the answer's, tune's are %s (trial #%s)"
                 % (page["rows"], answer["trial_indices"], best["index"]))
        report = os.path.join(work, "report.html")
        made = subprocess.run([a.cli, "--server", grpc_address, "--token", ALICE, "report", job,
                               "--html", report], capture_output=True, text=True, timeout=60)
        if made.returncode != 0:
            fail("report: %s" % made.stderr)
        browser.go("file://" + report)
        shown = browser.js(
            "return {strategy: document.querySelector('#answer .strategy').textContent,"
            " figure: document.querySelector('#answer .figure .value').textContent,"
            " text: document.getElementById('answer').textContent,"
            " caption: document.querySelector('#best-over-time .caption').textContent};")
        if shown["strategy"] != best["strategy"] or shown["figure"] != figure:
            fail("the report's answer %s is not tune's %s at %s" % (shown, best["strategy"],
                                                                    figure))
        if "trial %s" % best["trial_id"] not in shown["text"]:
            fail("the report's answer does not name trial %s: %r" % (best["trial_id"],
                                                                     shown["text"]))
        found = "by trial #%d." % answer["trial_indices"][0]
        if not shown["caption"].startswith("The answer, %s tokens/s" % figure) or \
                found not in shown["caption"]:
            fail("the report's best-over-time caption %r does not name the answer at %s %s"
                 % (shown["caption"], figure, found))
        print("page, report and tune --json: %s at %s tokens/s, trial %s"
              % (best["strategy"], figure, best["trial_id"]))

        browser.go(web + "/")
        listed = until("the job in the job list", lambda: browser.js(
            "var r = document.querySelector('#job-table tr[data-job=\"%s\"]');"
            "return r ? r.dataset.state : '';" % job), 10)
        if listed not in ("SUCCEEDED", "FAILED", "CANCELLED"):
            fail("the job list shows the job as %r" % listed)

        errors = [e for e in browser.console() if e.get("level") == "SEVERE"]
        if errors:
            fail("the browser console has errors: %s" % errors)
        browser.js("setTimeout(function () { throw new Error('dashboard self-check'); }, 0);")
        time.sleep(0.3)
        if not any("dashboard self-check" in e.get("message", "") for e in browser.console()):
            fail("a thrown error did not reach the console log: the check is blind")
        print("check_dashboard: ok (job %s, %.1f s)" % (job, time.monotonic() - started))
    finally:
        if tune is not None and tune.poll() is None:
            tune.kill()
        if browser:
            browser.quit()
        for d in reversed(daemons):
            d.stop()


if __name__ == "__main__":
    main()
