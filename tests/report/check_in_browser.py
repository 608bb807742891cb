#!/usr/bin/env python3
"""Opens the HTML job report in a real headless browser (Debian's chromium)
and fails on any console message (a script error, a blocked load), a missing
section, a script that did not run to its end, or markup from the job's text.

usage: check_in_browser.py WRITE_FIXTURE_REPORT_BIN WORK_DIR

The report of the canned job (tests/report/report_fixture.h) is written twice
(with predictions and device memory, and without either) and each is loaded.
The full page is then measured at two window widths (1400 and 520 px): no
label of the dimension bars may reach into the next column. A last load, of
the same page with a broken script added, must be caught: it shows the check
can see a script error at all.
"""
import html.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile

SECTIONS = ["settings", "answer", "throughput-memory", "best-over-time", "predicted-measured",
            "dimensions", "trials"]
CONSOLE = re.compile(r":CONSOLE[^\]]*\]\s*(.*)")


class Dom(html.parser.HTMLParser):
    """What the checks need of the rendered DOM."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = {}
        self.ids = set()
        self.html_attrs = {}
        self.title = ""
        self.text = []
        self._in_title = False
        self._skip = 0  # inside <script> or <style>

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "html":
            self.html_attrs = attrs
        if tag == "title":
            self._in_title = True
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.text.append(data)


def find_chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("check_in_browser: no chromium on PATH; install Debian's chromium package "
             "(scripts/setup does)")


# Added to a copy of the page: where a label of the dimension bars reaches
# past its own cell (into the median beside it), written into the DOM.
MEASURE_LABELS = """<script>
var over = [];
document.querySelectorAll('.barlabel').forEach(function (label) {
  var cell = label.closest('td'), r = label.getBoundingClientRect();
  var c = cell.getBoundingClientRect(), next = cell.nextElementSibling;
  if (r.right > c.right + 0.5 || (next && r.right > next.getBoundingClientRect().left + 0.5))
    over.push(label.textContent + ' reaches ' + Math.round(r.right - c.right) + ' px past its cell');
});
document.documentElement.setAttribute('data-labels', document.querySelectorAll('.barlabel').length);
document.documentElement.setAttribute('data-overlaps', over.join('; ') || 'none');
</script>"""
WIDTHS = (1400, 520)  # a desktop window and a phone's


def load(chromium, path, work, width=1400):
    """Loads `path` in a window `width` pixels wide; returns (the DOM after
    scripts ran, the console messages)."""
    profile = tempfile.mkdtemp(prefix="profile-", dir=work)
    try:
        run = subprocess.run(
            [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
             f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             f"--window-size={width},1000", "--dump-dom", "file://" + os.path.abspath(path)],
            capture_output=True, text=True, timeout=180)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if run.returncode != 0 or "<html" not in run.stdout:
        sys.exit(f"check_in_browser: chromium failed on {path} (exit {run.returncode}):\n"
                 f"{run.stderr[-3000:]}")
    console = [m.group(1) for m in map(CONSOLE.search, run.stderr.splitlines()) if m]
    return run.stdout, console


def check(chromium, path, work, with_predictions):
    dom_text, console = load(chromium, path, work)
    problems = [f"console: {line}" for line in console]
    dom = Dom()
    dom.feed(dom_text)
    if dom.html_attrs.get("data-report") != "rendered":
        problems.append("the page's script did not run to its end (no data-report=rendered)")
    for section in SECTIONS:
        if section not in dom.ids:
            problems.append(f"section #{section} is missing")
    if dom.tags.get("img", 0):
        problems.append("an <img> element exists: text from the job became markup")
    if dom.tags.get("script", 0) != 1:
        problems.append(f"{dom.tags.get('script', 0)} <script> elements, expected the page's one")
    if "pwned" in dom.title or not dom.title.startswith("autoaccel report: "):
        problems.append(f"the title changed: {dom.title!r}")
    text = "".join(dom.text)
    # The hostile text is shown as text, as the job carried it.
    if "<img src=x onerror=" not in text:
        problems.append("the job's status text is not shown as text")
    want_svgs = 4 if with_predictions else 2
    if dom.tags.get("svg", 0) != want_svgs:
        problems.append(f"{dom.tags.get('svg', 0)} charts, expected {want_svgs}")
    if not with_predictions and "This job recorded no predictions" not in text:
        problems.append("the missing predictions are not explained")
    if "recorded no predictions" in text and with_predictions:
        problems.append("predictions were given but the page says there are none")
    return problems


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    writer, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    chromium = find_chromium()
    failed = False
    for name, flags, with_predictions in [
            ("full", [], True),
            ("bare", ["--no-predictions", "--no-device-memory"], False)]:
        path = os.path.join(work, f"report-{name}.html")
        subprocess.run([writer, path] + flags, check=True)
        problems = check(chromium, path, work, with_predictions)
        for p in problems:
            print(f"{name}: {p}")
        failed |= bool(problems)
        print(f"{name}: {'FAILED' if problems else 'ok'} ({path})")

    with open(os.path.join(work, "report-full.html"), encoding="utf-8") as f:
        page = f.read()
    # No label of the dimension bars overlaps the next column, at either width.
    measured = os.path.join(work, "report-labels.html")
    with open(measured, "w", encoding="utf-8") as f:
        f.write(page.replace("</body>", MEASURE_LABELS + "</body>"))
    for width in WIDTHS:
        dom_text, _ = load(chromium, measured, work, width)
        labels = re.search(r'data-labels="(\d+)"', dom_text)
        overlaps = re.search(r'data-overlaps="([^"]*)"', dom_text)
        if not labels or int(labels.group(1)) == 0 or not overlaps:
            print(f"labels at {width} px: not measured (no bar labels, or the script did not run)")
            failed = True
        elif overlaps.group(1) != "none":
            print(f"labels at {width} px: {overlaps.group(1)}")
            failed = True
        else:
            print(f"labels at {width} px: {labels.group(1)} bar labels, none over the next column")

    # The check must see a script error when there is one.
    broken = os.path.join(work, "report-broken.html")
    with open(broken, "w", encoding="utf-8") as f:
        f.write(page.replace("</body>", "<script>noSuchFunction();</script></body>"))
    _, console = load(chromium, broken, work)
    if not any("noSuchFunction" in line for line in console):
        print("self-check: a page with a script error loaded without a console message; "
              "this check cannot see script errors")
        failed = True
    else:
        print("self-check: a broken script is caught")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
