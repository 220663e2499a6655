"""What every Python test script here shares: running a command and failing
with its output. The scripts run from this folder, so `from _common import
...` finds it."""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

# CTest kills a test at its TIMEOUT with nothing said about where it hung.
# Each command run here is given what is left of that time less a margin
# (PIPETUNE_TEST_TIMEOUT, set by tests/python/CMakeLists.txt with the
# test's TIMEOUT), and runs in a session of its own with Python's fault
# handler on; a command still running then gets SIGABRT across its whole
# process group, so every Python process in it (the training script, its
# workers) prints each thread's stack, and the test fails with that output.
_DEADLINE = time.monotonic() + float(os.environ.get("PIPETUNE_TEST_TIMEOUT", "300")) - 20


def run(cmd, timeout=None, **kw):
    """Runs `cmd`, capturing stdout and stderr as text; fails the test with
    every Python thread's stack if it outlives `timeout` or the test's own
    time."""
    left = max(5.0, _DEADLINE - time.monotonic())
    timeout = left if timeout is None else min(timeout, left)
    env = dict(kw.pop("env", None) or os.environ, PYTHONFAULTHANDLER="1")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGABRT, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, err = p.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            out, err = "", ""
        fail("%s still ran after %.0f s (killed; the stacks of its Python threads are in stderr)" %
             (" ".join(str(c) for c in cmd), timeout), subprocess.CompletedProcess(cmd, p.returncode, out, err))
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


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
