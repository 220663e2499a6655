"""The HTML report as a browser draws it: a DataLoader run's report and a
config run's, opened in headless Chromium, have the same charts, and every
chart is drawn (its marks laid out with a size, its data lines spanning the
run) with its text inside it.

    python3 report_in_browser.py PIPETUNE SOURCE_DIR [--keep DIR]

The reports themselves have no script. A copy of each gets one that
measures what Chromium laid out (getBBox, getBoundingClientRect) and writes
it into the page; `--dump-dom` prints the page once the script ran. --keep
DIR leaves the reports, the measurements and a screenshot of each there.
Exits 77 (skipped) where no Chromium is installed: CI does not install one
(tests/analyzer/dataloader_report_test.cc checks the same charts' SVG there).
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CASES = {
    "dataloader_workers0": "tests/analyzer/dataloader_golden/map_workers0/trace",
    "dataloader_workers2": "tests/analyzer/dataloader_golden/map_workers2_fork/trace",
    "config": "tests/cli/golden/two_stage_cpu.trace",
}
# Run here, for their trace: a config whose stages have torchvision's long
# names, one too long for any label column (the charts cut such names from
# the left: "]:RandomResizedCrop").
RUN_CASES = {
    "long_stage_names": {
        "name": "long_names",
        "stages": [
            {"name": "numbers", "op": "range", "args": {"count": 100000000, "bytes": 100}},
            {"name": "transform[0]:RandomResizedCrop", "op": "map", "fn": "cpu_work", "args": {"us": 40}},
            {"name": "transform[1]:RandomHorizontalFlipOfAnImageWithAVeryLongClassName", "op": "map",
             "fn": "cpu_work", "args": {"us": 20}, "parallelism": 2},
            {"name": "batch", "op": "batch", "args": {"size": 8}},
            {"name": "prefetch", "op": "prefetch", "buffer": 2},
        ],
    },
}
# The charts with a time axis, and the colour of their data line (svg.cc's
# series colours, report_html.cc's choice).
TIME_CHARTS = {
    "Throughput over time": "#2166ac",
    "Consumer stall over time (waiting for input)": "#d6604d",
}
HEAT_STRIP = "Per-stage busy share over time"

# Runs in the page once it is laid out; writes what it measured as JSON.
PROBE = """
<script>
window.addEventListener('load', () => {
  const charts = [];
  for (const svg of document.querySelectorAll('svg[aria-label]')) {
    const box = svg.getBoundingClientRect();
    const width = svg.viewBox.baseVal.width;
    const chart = {title: svg.getAttribute('aria-label'), width: box.width, height: box.height,
                   right: box.right, lines: {}, cells: 0, cells_span: 0, text_outside: []};
    for (const path of svg.querySelectorAll('path[fill="none"]')) {
      const b = path.getBBox();
      const points = (path.getAttribute('d').match(/[ML]/g) || []).length;
      chart.lines[path.getAttribute('stroke')] = {points: points, span: b.width / width};
    }
    let left = Infinity, right = -Infinity;
    // The heat strip's cells (svg.cc draws them 17 high; no other rect is).
    for (const rect of svg.querySelectorAll('rect[height="17"]')) {
      const b = rect.getBBox();
      if (b.width <= 0) continue;
      chart.cells++;
      left = Math.min(left, b.x);
      right = Math.max(right, b.x + b.width);
    }
    if (chart.cells > 0) chart.cells_span = (right - left) / width;
    // On the page, after transforms (the y axis' label is rotated).
    for (const text of svg.querySelectorAll('text')) {
      const b = text.getBoundingClientRect();
      if (b.left < box.left - 0.5 || b.right > box.right + 0.5 || b.top < box.top - 0.5 ||
          b.bottom > box.bottom + 0.5) {
        chart.text_outside.push(text.textContent);
      }
    }
    charts.push(chart);
  }
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify({page_width: document.documentElement.clientWidth, charts: charts});
  document.body.appendChild(pre);
});
</script>
"""

failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def find_browser():
    named = os.environ.get("PIPETUNE_CHROMIUM")
    if named:
        return named
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def browser(chromium, *args):
    # A profile of its own: no state shared with another run or a user.
    with tempfile.TemporaryDirectory() as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile] + list(args)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def measure(chromium, report, work):
    with open(report, encoding="utf-8") as f:
        page = f.read()
    probe = os.path.join(work, os.path.basename(report) + ".probe.html")
    with open(probe, "w", encoding="utf-8") as f:
        f.write(page.replace("</body>", PROBE + "</body>"))
    r = browser(chromium, "--window-size=1400,3000", "--virtual-time-budget=5000", "--dump-dom", "file://" + probe)
    found = re.search(r'<pre id="probe">(.*?)</pre>', r.stdout, re.S)
    if not found:
        print(r.stderr[-2000:])
        raise SystemExit("%s: Chromium ran no script in the page (exit %d)" % (report, r.returncode))
    return json.loads(html.unescape(found.group(1)))


def check(name, measured):
    charts = {c["title"]: c for c in measured["charts"]}
    for title, chart in charts.items():
        where = "%s: %s" % (name, title)
        expect(chart["width"] >= 400 and chart["height"] >= 80, "%s is laid out (%.0fx%.0f)" %
               (where, chart["width"], chart["height"]))
        expect(chart["right"] <= measured["page_width"], where + " fits the page")
        expect(not chart["text_outside"], "%s: text past its edges: %s" % (where, chart["text_outside"]))
    for title, color in TIME_CHARTS.items():
        line = charts.get(title, {}).get("lines", {}).get(color)
        expect(line is not None, "%s: %s has its data line" % (name, title))
        if line:
            expect(line["points"] >= 4, "%s: %s: %d points" % (name, title, line["points"]))
            expect(line["span"] >= 0.4, "%s: %s spans %.0f%% of the chart" % (name, title, 100 * line["span"]))
    heat = charts.get(HEAT_STRIP, {})
    expect(heat.get("cells", 0) >= 8, "%s: %s has cells (%d)" % (name, HEAT_STRIP, heat.get("cells", 0)))
    expect(heat.get("cells_span", 0) >= 0.5, "%s: %s's cells span the chart" % (name, HEAT_STRIP))
    return set(charts)


def main():
    if len(sys.argv) not in (3, 5) or (len(sys.argv) == 5 and sys.argv[3] != "--keep"):
        raise SystemExit(__doc__)
    pipetune, source = sys.argv[1], sys.argv[2]
    chromium = find_browser()
    if chromium is None:
        print("skipped: no Chromium installed (apt-get install chromium)")
        return SKIP
    keep = sys.argv[4] if len(sys.argv) == 5 else None
    with tempfile.TemporaryDirectory() as tmp:
        work = keep or tmp
        os.makedirs(work, exist_ok=True)
        titles = {}
        traces = {name: os.path.join(source, trace) for name, trace in CASES.items()}
        for name, config in RUN_CASES.items():
            path = os.path.join(work, name + ".json")
            with open(path, "w") as f:
                json.dump(config, f)
            traces[name] = os.path.join(work, name + ".trace")
            r = subprocess.run([pipetune, "run", path, "--seconds", "1", "--trace", traces[name]],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit("pipetune run %s: exit %d\n%s" % (path, r.returncode, r.stderr))
        for name, trace in traces.items():
            report = os.path.join(work, name + ".html")
            r = subprocess.run([pipetune, "report", trace, "--format", "html", "-o", report],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit("pipetune report %s: exit %d\n%s" % (trace, r.returncode, r.stderr))
            measured = measure(chromium, report, work)
            titles[name] = check(name, measured)
            if keep:
                with open(os.path.join(work, name + ".json"), "w") as f:
                    json.dump(measured, f, indent=1)
                browser(chromium, "--window-size=1300,1500", "--screenshot=" + os.path.join(work, name + ".png"),
                        "file://" + os.path.abspath(report))
        for name in traces:
            expect(titles[name] == titles["config"], "%s has a config's charts: %s against %s" %
                   (name, sorted(titles[name]), sorted(titles["config"])))
    if failures:
        print("%d failures" % len(failures))
        return 1
    print("ok: %d reports, %d charts each, drawn by %s" % (len(titles), len(titles["config"]), chromium))
    return 0


if __name__ == "__main__":
    sys.exit(main())
