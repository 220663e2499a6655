"""The GIL probe (python/pipetune/_gilprobe.py) against the truth, and what
it costs (docs/benchmarks-pytorch.md). From the repository root:

    /usr/bin/python3 bench/pytorch/gil_probe.py [BUILD_DIR] [--rounds N]

1. Its estimate: tests/python/test_gil.py's two datasets, each sample about
   2 ms of CPU, profiled at num_workers 0 and 2. `python` spins in the
   interpreter: all of its CPU holds the GIL (truth 1.0). `hash` runs
   hashlib.sha256 over 4 MiB, which CPython runs with the GIL let go: its
   truth is the few microseconds of Python around the call (about 0.0).
   Each line: the share of a sample's CPU the report says held the GIL, the
   probe's wakes in the fetch windows and its own CPU.
2. Its cost: `python` at num_workers=0 (the worst case: every wake asks the
   fetching thread to let go of the GIL), traced with the probe and with
   PIPETUNE_GIL_PROBE=0, alternating, N rounds (default 5): the loop's
   samples/s and the process's CPU per sample (the probe's own and the GIL
   hand-offs it causes; steadier than wall time on a shared host) with
   over without, per pair, and their medians."""
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "python"))
import test_gil  # noqa: E402 (the datasets and the profiling are the test's)


def main():
    args = sys.argv[1:]
    rounds = 5
    if "--rounds" in args:
        at = args.index("--rounds")
        rounds = int(args[at + 1])
        del args[at:at + 2]
    build = args[0] if args else os.path.join(HERE, "..", "..", "build")
    pipetune = os.path.abspath(os.path.join(build, "cli", "pipetune"))
    with tempfile.TemporaryDirectory() as tmp:
        print("1. the probe's GIL share of a sample's CPU against the truth")
        for kind, truth in (("python", 1.0), ("hash", 0.0)):
            for workers in (0, 2):
                trace, _ = test_gil.profile(pipetune, tmp, kind, workers)
                gil, share = test_gil.gil_share(pipetune, trace, kind)
                print("  %-6s num_workers=%d: %.2f (truth %.1f), %d wakes, %d late, probe CPU %.3f s over %.2f s "
                      "of fetching" % (kind, workers, share, truth, gil["wakes"], gil["gil_late"],
                                       gil["probe_cpu_seconds"], gil["window_seconds"]))
        print("2. the probe's cost: python at num_workers=0, with the probe over without")
        speed, cpu = [], []
        off = dict(os.environ, PIPETUNE_GIL_PROBE="0")
        for r in range(rounds):
            _, on_run = test_gil.profile(pipetune, tmp, "python", 0)
            _, off_run = test_gil.profile(pipetune, tmp, "python", 0, env=off)
            speed.append(on_run["samples_per_second"] / off_run["samples_per_second"])
            cpu.append(on_run["process_cpu_per_sample"] / off_run["process_cpu_per_sample"])
            print("  round %d: samples/s %.1f / %.1f = %.3f; process CPU per sample %.3f / %.3f ms = %.3f" %
                  (r + 1, on_run["samples_per_second"], off_run["samples_per_second"], speed[-1],
                   on_run["process_cpu_per_sample"] * 1e3, off_run["process_cpu_per_sample"] * 1e3, cpu[-1]))
        print("  median over %d rounds: samples/s %.3f, process CPU per sample %.3f" %
              (rounds, statistics.median(speed), statistics.median(cpu)))

if __name__ == "__main__":
    main()
