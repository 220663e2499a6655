"""What every Python test script here shares: running a command and failing
with its output. The scripts run from this folder, so `from _common import
...` finds it."""
import importlib.util
import json
import subprocess
import sys


def run(cmd, **kw):
    """Runs `cmd`, capturing stdout and stderr as text."""
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def fail(message, *results):
    """Prints FAIL and each result's output, then exits 1."""
    print("FAIL:", message)
    for r in results:
        print("stdout:", r.stdout, "\nstderr:", r.stderr)
    sys.exit(1)


# For a generated training script (spliced in with str.format as {spin}):
# CPU work spun on the thread's own clock, as decoding or augmenting is, so
# that a busy host does not change what a transform costs.
SPIN_SOURCE = """def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
"""


def skip_without(*modules):
    """Exits 77 (CTest's skip) when this interpreter lacks one of `modules`
    (Debian's python3 has no webdataset, datasets, torchdata or tensorflow)."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            print("skipped: %s has no %s" % (sys.executable, module))
            sys.exit(77)


def json_report(pipetune, trace):
    """`pipetune report TRACE --format json`, parsed; fails on its error."""
    r = run([pipetune, "report", trace, "--format", "json"])
    if r.returncode != 0:
        fail("report exited %d" % r.returncode, r)
    return json.loads(r.stdout)


def profile_and_report(pipetune, trace, program):
    """`pipetune profile --trace TRACE -- PROGRAM...`, then its JSON report."""
    r = run([pipetune, "profile", "--trace", trace, "--"] + program)
    if r.returncode != 0:
        fail("profile exited %d" % r.returncode, r)
    return json_report(pipetune, trace)
