"""Streaming datasets profiled per stage, measured (docs/benchmarks-pytorch.md,
"Streaming datasets"). From the repository root, with the torch 2.x venv
(`scripts/setup.sh`, which installs webdataset and datasets):

    ~/.local/share/pipetune/torch2/bin/python3 bench/pytorch/streams.py [BUILD_DIR] [--epochs N]

For each of tests/python/test_streams.py's two scripts, at larger sizes (a
webdataset pipeline over tar shards: read, decode, to_tuple, a 4 ms map,
batched; an HF datasets IterableDataset: a 1 ms and a 4 ms `.map`,
with_format("torch")): traced runs at num_workers 0, 1 and 2, each with
its predicted over measured batches/s and the stage named; then `tune`
from the num_workers=0 trace, the tuned kwargs run applied and traced, its
prediction against its measurement. The last lines summarise: how many
runs predicted within 10%, and whether each named the costly map.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_scripts():
    """tests/python/test_streams.py: the same scripts the tests run."""
    path = os.path.join(ROOT, "tests", "python", "test_streams.py")
    spec = importlib.util.spec_from_file_location("test_streams", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("%s exited %d:\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    build = args[0] if args else os.path.join(ROOT, "build")
    epochs = 3
    if "--epochs" in sys.argv:
        epochs = int(sys.argv[sys.argv.index("--epochs") + 1])
    pipetune = os.path.abspath(os.path.join(build, "cli", "pipetune"))
    streams = load_scripts()
    workloads = {
        "webdataset": (streams.WEBDATASET.format(slow=streams.SLOW, shards=8, per_shard=40, batch=16,
                                                epochs=epochs),
                       "transform[3]:map:normalize"),
        "hf_datasets": (streams.HF_DATASETS.format(slow=streams.SLOW, samples=320, batch=16, epochs=epochs),
                        "transform[2]:map:scale"),
    }
    ratios, named, total = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for kind, (source, slow_stage) in workloads.items():
            script = os.path.join(tmp, "train_%s.py" % kind)  # not webdataset.py: it would shadow the module
            with open(script, "w") as f:
                f.write(source)
            print("== %s: predicted / measured batches/s, traced runs of %d epochs" % (kind, epochs))

            def measure(label, workers, apply=None):
                nonlocal named, total
                trace = os.path.join(tmp, "%s-%s.trace" % (kind, label))
                cmd = [pipetune, "profile", "--trace", trace]
                if apply:
                    cmd += ["--apply", apply]
                run(cmd + ["--", sys.executable, script, str(workers), tmp])
                rep = json.loads(run([pipetune, "report", trace, "--format", "json"]).stdout)
                stage = rep["bottleneck"] or (rep["next_limit"] or {}).get("stage") or rep["bound"]
                ratio = rep["prediction_ratio"]
                ratios.append(ratio)
                named += stage == slow_stage
                total += 1
                print("%-4s measured %7.2f  predicted %7.2f  bound %-11s stage %-28s ratio %.3f" % (
                    label, rep["throughput"], rep["predicted_throughput"], rep["bound"], stage, ratio))
                return trace

            w0 = measure("w0", 0)
            for workers in (1, 2):
                measure("w%d" % workers, workers)
            kwargs = os.path.join(tmp, kind + ".kwargs.json")
            run([pipetune, "tune", w0, "-o", kwargs, "--cores", "2", "--memory", "8GiB"])
            with open(kwargs) as f:
                print("tuned settings:", json.dumps(json.load(f), sort_keys=True))
            measure("tuned", 0, apply=kwargs)
    print("== summary")
    within = sum(1 for r in ratios if abs(r - 1) <= 0.10)
    print("predicted/measured over %d runs: min %.3f max %.3f; within 10%%: %d of %d" % (
        len(ratios), min(ratios), max(ratios), within, len(ratios)))
    print("the costly map named: %d of %d" % (named, total))


if __name__ == "__main__":
    main()
