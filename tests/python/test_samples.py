"""How a sample's stages reach the tracer (python/pipetune/_samples.py and
_recorder.py), driven directly with a stand-in recorder and tracer, so that
what is checked is the rule and not the host's timing:

- cpu_sampling: a dataset's samples read the thread's CPU clock on their
  first 8 and then one in 8 (PIPETUNE_CPU_CLOCK_EVERY); the other samples'
  stages are charged their wall time at the stage's CPU share so far. A
  stage that computes is charged about its time, one that sleeps nearly
  nothing, and every sample is counted.
- buffered_records: a thread's records reach the tracer together, in
  order, none lost: at 64 records, 20 ms after the first ended, at
  detach_thread() and stop(); nothing after stop().

Usage: test_samples.py CASE PIPETUNE_BINARY (the package is the build's)."""
import ctypes
import os
import sys
import threading


def package(pipetune):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(pipetune)), "python"))


class FakeTracer:
    """Keeps what pipetune_elements was handed, record by record."""

    def __init__(self):
        self.calls = []

    def elements(self, address, count):
        values = (ctypes.c_uint64 * (7 * count)).from_address(address)
        self.calls.append([tuple(values[7 * i:7 * i + 7]) for i in range(count)])

    def attach_worker(self, sid):
        return 1000 + sid

    def register_stage(self, name, op, parallelism):
        return len(name)  # a stage id; distinct enough for the names below

    def detach_worker(self, worker):
        pass

    def stop(self):
        pass


def recorder():
    from pipetune import _recorder

    rec = _recorder.Recorder.__new__(_recorder.Recorder)
    rec.tracer = FakeTracer()
    rec.path, rec.pid, rec.name, rec.info = "fake", os.getpid(), "fake", {}
    rec.stages = {}
    rec.local = threading.local()
    rec.running = True
    return rec


def expect(ok, what, *detail):
    if not ok:
        print("FAIL:", what, *detail)
        sys.exit(1)


def case_cpu_sampling():
    from pipetune import _samples

    expect(_samples.CPU_CLOCK_EVERY == 8, "the default is one sample in 8", _samples.CPU_CLOCK_EVERY)
    rec = recorder()
    ctx = _samples.SampleContext(rec)
    n, reads = 200, 0
    t = 1_000_000_000
    for i in range(n):
        ctx.begin(rec, "", i)
        # Two stages of 1 ms each: `compute` spends 0.9 ms of CPU in it,
        # `nap` 0.02 ms. Only a sample that reads the clock sees the CPU;
        # the others' clock is 0 on both sides.
        reading = ctx.clock is not _samples._no_clock
        reads += reading
        ctx.record("compute", t, t + 1_000_000, i, 900_000 if reading else ctx.clock() - ctx.clock())
        ctx.record("nap", t + 1_000_000, t + 2_000_000, i, 20_000 if reading else 0)
        t += 2_000_000
    rec.flush()
    expect(reads == sum(1 for i in range(n) if i < 8 or i % 8 == 0), "samples that read the clock", reads)
    expect(reads < n // 4, "most samples do not read the clock", reads)
    cpu = {}
    count = {}
    names = {1000 + len("compute"): "compute", 1000 + len("nap"): "nap"}
    for call in rec.tracer.calls:
        for worker, begin, end, element, cpu_ns, elements, nbytes in call:
            name = names[worker]
            cpu[name] = cpu.get(name, 0) + cpu_ns
            count[name] = count.get(name, 0) + elements
    expect(count == {"compute": n, "nap": n}, "every sample counted once per stage", count)
    expect(abs(cpu["compute"] - n * 900_000) < n * 900_000 * 0.01, "the computing stage's CPU", cpu)
    expect(abs(cpu["nap"] - n * 20_000) < n * 20_000 * 0.01, "the sleeping stage's CPU", cpu)


def case_buffered_records():
    from pipetune import _recorder

    rec = recorder()
    pending = rec.buffer()
    t = 1_000_000_000
    # 63 records 1 us apart: held; the 64th hands all over in one call.
    for i in range(64):
        rec.push(pending, 7, t + i * 1000, t + i * 1000 + 500, i, 10)
        expect(len(rec.tracer.calls) == (1 if i == 63 else 0), "64 records per call", i, rec.tracer.calls[:1])
    expect([r[3] for r in rec.tracer.calls[0]] == list(range(64)), "in order")
    expect(rec.tracer.calls[0][0] == (7, t, t + 500, 0, 10, 1, 0), "a record's fields", rec.tracer.calls[0][0])
    # A record ending 20 ms after the first pending one hands both over.
    rec.push(pending, 7, t, t + 1000, 100, 5)
    rec.push(pending, 7, t + 1000, t + 1000 + _recorder.PENDING_NS + 1, 101, -3, count=4, nbytes=9)
    expect(len(rec.tracer.calls) == 2 and len(rec.tracer.calls[1]) == 2, "20 ms bounds the wait", rec.tracer.calls)
    expect(rec.tracer.calls[1][1][4:] == (0, 4, 9), "negative CPU as 0; count and bytes kept", rec.tracer.calls[1])
    # detach_thread() and stop() hand over what is left; nothing after stop.
    rec.push(pending, 7, t, t + 1, -1, 1)
    rec.detach_thread()
    expect(len(rec.tracer.calls) == 3 and rec.tracer.calls[2][0][3] == (1 << 64) - 1, "detach flushes", rec.tracer.calls)
    rec.push(rec.buffer(), 7, t, t + 1, 5, 1)
    rec.stop()
    expect(len(rec.tracer.calls) == 4, "stop flushes", rec.tracer.calls)
    rec.push(rec.buffer(), 7, t, t + 1, 6, 1)
    rec.flush()
    expect(len(rec.tracer.calls) == 4, "nothing handed over after stop", rec.tracer.calls)


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    os.environ.pop("PIPETUNE_CPU_CLOCK_EVERY", None)  # the default is what is checked
    package(pipetune)
    {"cpu_sampling": case_cpu_sampling, "buffered_records": case_buffered_records}[case]()
    print("ok:", case)


if __name__ == "__main__":
    main()
