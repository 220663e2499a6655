"""CUPTI in a profiled Python run, with the fake libcupti and libcuda.so.1:
`pipetune profile -- python3 train.py`, whose training step initialises
"CUDA" (the fake driver loads the injection, which records the process's GPU
activity into TRACE.gpu.<pid>), then `pipetune report TRACE` must say how
much of the loop the GPU waited for the DataLoader, and for which stage.
Usage: python_gpu_test.py PIPETUNE FAKE_LIBCUDA FAKE_LIBCUPTI INJECTION.
Exit 77 (skipped) when this Python has no torch."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap

if importlib.util.find_spec("torch") is None:
    print("skipped: %s has no torch" % sys.executable)
    sys.exit(77)

# The input side is slow (15 ms per sample, 4 per batch, on the loop's own
# thread at num_workers=0), the step quick: the GPU, busy 30 ms of
# every 100 ms snapshot interval by the fake's account, idles the rest while
# the loop waits for batches.
SCRIPT = textwrap.dedent("""
    import ctypes, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow:
        def __call__(self, x):
            time.sleep(0.015)
            return x

    class Samples(Dataset):
        def __init__(self, transform):
            self.transform = transform
        def __len__(self):
            return 80
        def __getitem__(self, i):
            return self.transform(torch.full((8,), float(i)))

    cuda = ctypes.CDLL(sys.argv[1])
    loader = DataLoader(Samples(Slow()), batch_size=4, num_workers=0)
    for batch in loader:
        cuda.cuInit(0)  # as torch does on first use; loads the injection
        time.sleep(0.002)
""")


def main():
    pipetune, libcuda, libcupti, injection = sys.argv[1:5]
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        trace = os.path.join(tmp, "train.trace")
        env = dict(os.environ, PIPETUNE_LIBCUPTI=libcupti, PIPETUNE_CUPTI_INJECTION=injection,
                   FAKE_CUPTI_BUSY_US="30000")
        run = subprocess.run([pipetune, "profile", "--trace", trace, "--", sys.executable, script, libcuda],
                             env=env, capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            print("FAIL: profile exited %d\n%s\n%s" % (run.returncode, run.stdout, run.stderr))
            return 1
        gpu_files = [n for n in os.listdir(tmp) if n.startswith("train.trace.gpu.")]
        if len(gpu_files) != 1:
            print("FAIL: expected one train.trace.gpu.<pid> beside the trace, found %s" % os.listdir(tmp))
            return 1
        report = subprocess.run([pipetune, "report", trace, "--format", "json"], capture_output=True,
                                text=True, timeout=60)
        if report.returncode != 0:
            print("FAIL: report exited %d\n%s" % (report.returncode, report.stderr))
            return 1
        doc = json.loads(report.stdout)
        gpu = doc.get("gpu")
        problems = []
        if not gpu:
            problems.append("the report has no gpu object")
        else:
            if not 0.1 <= gpu["busy_fraction"] <= 0.6:
                problems.append("GPU busy %.2f, expected about 0.3" % gpu["busy_fraction"])
            if gpu["verdict"] != "input_stalled" or gpu["input_stall_inferred"]:
                problems.append("verdict %s (inferred %s), expected input_stalled from the loop's waits"
                                % (gpu["verdict"], gpu["input_stall_inferred"]))
        summary = doc.get("summary", "")
        stage = "for %s most of all" % doc.get("bottleneck")
        if doc.get("bottleneck") is None or "The GPU waited for the DataLoader" not in summary or stage not in summary:
            problems.append("the summary does not say how long the GPU waited, and for which stage: %r"
                            % summary)
        text = subprocess.run([pipetune, "report", trace], capture_output=True, text=True, timeout=60).stdout
        if "gpu" not in text:
            problems.append("the text report has no gpu line")
        if problems:
            print("FAIL:\n  " + "\n  ".join(problems))
            print(json.dumps(gpu, indent=2))
            return 1
        print("ok: GPU busy %.2f, stalled %.2f s of %.2f s idle; %s"
              % (gpu["busy_fraction"], gpu["input_stall_seconds"], gpu["idle_seconds"], summary))
        return 0


if __name__ == "__main__":
    sys.exit(main())
