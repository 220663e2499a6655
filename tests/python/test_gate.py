"""The CI gate on a real DataLoader: `pipetune baseline` / `pipetune check`
with `-- python3 train.py` and with traces (docs/ci-gate.md).
Usage: test_gate.py CASE PIPETUNE, or test_gate.py write-script DIR NAME SLOW
(the script alone, Blur SLOW times its cost: the gate benchmark's). Exit 77 when this Python has no torch."""
import importlib.util
import os
import sys
import tempfile
import textwrap
from _common import SPIN_SOURCE, run

# Looked up, not imported: importing torch costs a second of CPU, and the
# scripts this runs import it themselves.
if importlib.util.find_spec("torch") is None or importlib.util.find_spec("torchvision") is None:
    print("skipped: %s has no torch/torchvision" % sys.executable)
    sys.exit(77)

# A transform's cost is CPU work (as decoding or augmenting is), spun on the
# thread's own clock so that a busy machine does not change it. `slow`
# multiplies Blur's; `extra` adds a third transform (another loader);
# `exit_code` makes the script fail after its loop.
SCRIPT = textwrap.dedent("""
    import sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset
    from torchvision import transforms

    {spin}

    class Scale:
        def __call__(self, x):
            spin(0.0005)
            return x * 2.0

    class Blur:
        def __call__(self, x):
            spin(0.002 * {slow})
            return x + 1.0

    class Flip:
        def __call__(self, x):
            return x.flip(0)

    class Squares(Dataset):
        def __init__(self, n, transform):
            self.n, self.transform = n, transform
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            return self.transform(torch.full((3, 8, 8), float(i))), i

    if __name__ == "__main__":
        steps = [Scale(), Blur()] + ([Flip()] if {extra} else [])
        loader = DataLoader(Squares(96, transforms.Compose(steps)), batch_size=8, num_workers=1)
        for batch, labels in loader:
            time.sleep(0.001)
        sys.exit({exit_code})
""")


def write_script(tmp, name, slow=1, extra=False, exit_code=0):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(SCRIPT.format(spin=SPIN_SOURCE, slow=slow, extra=extra, exit_code=exit_code))
    return path


def expect(r, code, *words):
    out = r.stdout + r.stderr
    if r.returncode != code or any(w not in out for w in words):
        print("FAIL: %s\nexit %d, expected %d with %s" % (" ".join(r.args), r.returncode, code, words))
        print("stdout:", r.stdout, "\nstderr:", r.stderr)
        sys.exit(1)


def case_command(pipetune, tmp):
    script = write_script(tmp, "train.py")
    base = os.path.join(tmp, "base.json")
    expect(run([pipetune, "baseline", "--runs", "2", "-o", base, "--", sys.executable, script]), 0,
           "baseline of DataLoader(Squares) (2 runs)")
    # The unchanged script: never a stage blamed. A pass; or, on a host
    # busier than at the baseline, what the gate says of the host: a
    # throughput shift with every stage steady (a CI run measured -10.2%
    # with Scale +4.1%, Blur +1.6%), or its "busier" verdict, exit 0 (beside
    # two CPU hogs and other work: throughput -28.3%, Scale +2.5%, Blur +1.1%,
    # the stages' waits for a core +41.3%). Not its "every stage moved by one
    # factor" verdict: each sample reads the thread's CPU clock in the gate,
    # so a busy host leaves the stages' CPU steady, and a stage's cost that
    # moved with the load would be the recorder's error.
    r = run([pipetune, "check", "--baseline", base, "--runs", "2", "--", sys.executable, script])
    headline = r.stdout.splitlines()[1] if r.stdout.count("\n") >= 1 else ""
    if r.returncode == 1 and headline.startswith("REGRESSION: throughput") and "stage" not in headline:
        print("the unchanged check moved with the host (not a stage):", headline)
    elif r.returncode == 0 and headline.startswith("MACHINE: throughput") and "CPU per element steady" in headline:
        print("the unchanged check saw a busier host (not a stage):", headline)
    else:
        expect(r, 0, "PASS")
    # The same script with Blur 4x slower.
    slow = write_script(tmp, "slow.py", slow=4)
    with open(base) as f:
        recorded = f.read()
    junit, markdown = os.path.join(tmp, "junit.xml"), os.path.join(tmp, "summary.md")
    r = run([pipetune, "check", "--baseline", base, "--runs", "2", "--junit", junit, "--markdown", markdown,
             "--", sys.executable, slow])
    # Blur named among the regressed stages, wherever in the line: on a loaded
    # host a cheap stage's noise (transform[0]:Scale +10%) was once named first.
    expect(r, 1, "REGRESSION: ", "stage transform[1]:Blur costs")
    for path in (junit, markdown):
        with open(path) as f:
            if "transform[1]:Blur" not in f.read():
                print("FAIL: %s does not name transform[1]:Blur" % path)
                sys.exit(1)
    with open(base) as f:
        if f.read() != recorded:
            print("FAIL: check changed the baseline")
            sys.exit(1)


def case_bad_input(pipetune, tmp):
    script = write_script(tmp, "train.py")
    traces = []
    for i in range(2):
        trace = os.path.join(tmp, "run%d.trace" % i)
        expect(run([pipetune, "profile", "--trace", trace, "--", sys.executable, script]), 0)
        traces.append(trace)
    base = os.path.join(tmp, "base.json")
    expect(run([pipetune, "baseline", "-o", base] + traces), 0, "(2 runs)")
    # Whole trace sets, as `run*.trace*` expands: the workers' are read with their main trace.
    sets = sorted(os.path.join(tmp, n) for n in os.listdir(tmp) if ".trace" in n)
    expect(run([pipetune, "check", "--baseline", base] + sets), 0, "PASS")
    # Another loader: a transform added.
    other = write_script(tmp, "other.py", extra=True)
    expect(run([pipetune, "check", "--baseline", base, "--runs", "1", "--", sys.executable, other]), 2,
           "a baseline of another DataLoader", "transform[2]:Flip")
    # A script that fails: its status, no verdict, exit 2.
    failing = write_script(tmp, "failing.py", exit_code=3)
    expect(run([pipetune, "check", "--baseline", base, "--runs", "1", "--", sys.executable, failing]), 2,
           "exited with status 3", "no verdict")
    # A trace set missing its worker's trace; nothing written.
    for name in os.listdir(tmp):
        if name.startswith("run1.trace."):
            os.remove(os.path.join(tmp, name))
    half = os.path.join(tmp, "half.json")
    expect(run([pipetune, "baseline", "-o", half] + traces), 2, "run1.trace", "missing")
    if os.path.exists(half):
        print("FAIL: a baseline was written from an incomplete trace set")
        sys.exit(1)
    expect(run([pipetune, "check", "--baseline", base, traces[1]]), 2, "missing")


def main():
    if sys.argv[1] == "write-script":  # for bench/gate/pytorch_gate_eval.sh: DIR NAME SLOW
        write_script(sys.argv[2], sys.argv[3], slow=float(sys.argv[4]))
        return
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        {"command": case_command, "bad_input": case_bad_input}[case](pipetune, tmp)
    print("ok", case)


if __name__ == "__main__":
    main()
