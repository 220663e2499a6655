"""What every Python test script here shares: running a command and failing
with its output. The scripts run from this folder, so `from _common import
...` finds it."""
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
