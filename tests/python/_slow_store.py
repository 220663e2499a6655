"""A slow object store for the fetch-thread tests and benchmark: files served
over HTTP/1.1 from a network namespace of their own, behind a veth pair
whose store end delays every packet it sends (`tc qdisc ... netem delay`),
so that each GET on a kept-alive connection waits one delay on the network,
as a read from S3 does, while using almost no CPU.

Everything is made by this run and removed when it ends, failed or not: the
namespace, the pair (removed with the namespace), the server. Addresses are
on a /30 of 10.231.0.0/16 picked from the process id, so that runs side by
side do not share one; nothing is routed off the machine.

Where the kernel has no netem (sch_netem), the namespace's server waits
the delay before each answer instead: the reads still cross the veth pair.
Where no namespace can be made (not root, no iproute2), `open_store`
raises Unavailable with the reason; `open_loopback` is the fallback, a
server on 127.0.0.1 that sleeps the delay before each response.

Run as a script, it is the server: `_slow_store.py serve DIR ADDR PORT
SLEEP_MS` (the namespace's, started with `ip netns exec`)."""
import http.client
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time


class Unavailable(Exception):
    """No namespace could be made here; the message says why."""


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive: one network delay per GET, not a handshake too
    disable_nagle_algorithm = True  # the body is not held back for the ACK of the headers
    root = "."
    sleep_s = 0.0

    def do_GET(self):
        path = os.path.join(self.root, os.path.basename(self.path))
        try:
            with open(path, "rb") as f:
                body = f.read()
        except OSError:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.sleep_s:
            time.sleep(self.sleep_s)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(root, addr, port, sleep_ms):
    _Handler.root = root
    _Handler.sleep_s = float(sleep_ms) / 1000
    http.server.ThreadingHTTPServer.request_queue_size = 256  # 5 by default: a burst of connects waited 1 s for a SYN retry
    server = http.server.ThreadingHTTPServer((addr, int(port)), _Handler)
    server.daemon_threads = True
    server.serve_forever()


def _wait_until_up(addr, port, process, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Unavailable("the store's server exited with %d" % process.returncode)
        try:
            socket.create_connection((addr, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise Unavailable("the store's server did not answer on %s:%d" % (addr, port))


class Store:
    """A running store: `url` is where its files are (http://ADDR:PORT/),
    `kind` says how it is slow ("netns netem 25 ms", "loopback sleep 25 ms", ...)."""

    def __init__(self, url, kind, process, cleanup):
        self.url = url
        self.kind = kind
        self._process = process
        self._cleanup = cleanup

    def close(self):
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        for command in self._cleanup:
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._cleanup = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _ip(*args):
    r = subprocess.run(["ip"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise Unavailable("`ip %s` failed: %s" % (" ".join(args), r.stderr.strip()))


def open_store(root, delay_ms=25, port=8080):
    """Serves `root` from a new namespace behind a veth pair delayed by
    delay_ms. Raises Unavailable (with the reason) where that cannot be done."""
    if os.geteuid() != 0:
        raise Unavailable("a network namespace needs root (this is uid %d)" % os.geteuid())
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise Unavailable("no `%s` (Debian's iproute2) on PATH" % tool)
    pid = os.getpid()
    ns, host_end, store_end = "pt-store-%d" % pid, "ptsh%d" % (pid % 10**8), "ptss%d" % (pid % 10**8)
    base = (pid % 16000) * 4  # a /30 of 10.231.0.0/16: the network, the two ends, broadcast
    host_addr = "10.231.%d.%d" % (base >> 8, (base & 255) + 1)
    store_addr = "10.231.%d.%d" % (base >> 8, (base & 255) + 2)
    cleanup = [["ip", "netns", "del", ns], ["ip", "link", "del", host_end]]
    store = Store("http://%s:%d/" % (store_addr, port), "netns netem %g ms" % delay_ms, None, cleanup)
    try:
        _ip("netns", "add", ns)
        _ip("link", "add", host_end, "type", "veth", "peer", "name", store_end)
        _ip("link", "set", store_end, "netns", ns)
        _ip("addr", "add", host_addr + "/30", "dev", host_end)
        _ip("link", "set", host_end, "up")
        _ip("netns", "exec", ns, "ip", "addr", "add", store_addr + "/30", "dev", store_end)
        _ip("netns", "exec", ns, "ip", "link", "set", store_end, "up")
        _ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
        sleep_ms = 0
        try:
            _ip("netns", "exec", ns, "tc", "qdisc", "add", "dev", store_end, "root", "netem", "delay",
                "%gms" % delay_ms)
        except Unavailable as error:
            if "unknown" not in str(error):
                raise
            # A kernel built without sch_netem (this development machine's):
            # the reads still cross the veth pair into the namespace, and the
            # server waits the delay before each answer instead of the link.
            sleep_ms = delay_ms
            store.kind = "netns, server sleep %g ms (no netem in this kernel)" % delay_ms
        store._process = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__), "serve", root, store_addr,
             str(port), str(sleep_ms)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_until_up(store_addr, port, store._process)
    except BaseException:
        store.close()
        raise
    return store


def open_loopback(root, delay_ms=25):
    """The fallback: `root` served on 127.0.0.1, each response after delay_ms of sleep."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve", root, "127.0.0.1", str(port),
                                str(delay_ms)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    store = Store("http://127.0.0.1:%d/" % port, "loopback sleep %g ms" % delay_ms, process, [])
    try:
        _wait_until_up("127.0.0.1", port, process)
    except BaseException:
        store.close()
        raise
    return store


# A dataset reading from a store, for the generated training scripts
# (spliced in as {store_dataset}): a pool of kept-alive connections, as an
# S3 client (urllib3's pool) keeps them, so that each GET waits one network
# delay and no connect; a thread takes one from the pool for each read.
DATASET_SOURCE = '''
import http.client, threading, time, urllib.parse

class StoreDataset(torch.utils.data.Dataset):
    def __init__(self, url, names, cpu_s=0.0):
        self.url, self.names, self.cpu_s = url, names, cpu_s
        self.pool, self.lock = [], threading.Lock()

    def __len__(self):
        return len(self.names)

    def _take(self):
        with self.lock:
            if self.pool:
                return self.pool.pop()
        u = urllib.parse.urlsplit(self.url)
        return http.client.HTTPConnection(u.hostname, u.port, timeout=30)

    def __getitem__(self, i):
        began = time.monotonic()
        c = self._take()
        try:
            c.request("GET", "/" + self.names[i])
            r = c.getresponse()
            body = r.read()
        except Exception:
            c.close()
            raise
        with self.lock:
            self.pool.append(c)
        if r.status != 200:
            raise IOError("GET %s%s: HTTP %d" % (self.url, self.names[i], r.status))
        if self.cpu_s:
            spin(self.cpu_s)
        # The read's wall time (GET and CPU) rides with the sample: the loop sums the reads' time in flight.
        return torch.frombuffer(bytearray(body), dtype=torch.uint8)[:64].float().sum().reshape(1), i, \
            time.monotonic() - began

    def __getstate__(self):
        return {{"url": self.url, "names": self.names, "cpu_s": self.cpu_s}}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.pool, self.lock = [], threading.Lock()
'''


# A training script reading from a store (the fetch tests' and
# bench/pytorch/fetch_threads.py's): argv is URL FILES BATCH WORKERS
# FETCH_THREADS PREFETCH; fetch threads > 1 are the wrapper in code, as the
# plan prints it. It prints its images/s from the first batch on (the
# workers' start-up is not the reads), over the whole epoch (the iterator's
# start-up included: what the model predicts), and the peak over the run of its
# processes, their threads and their resident memory, summed over it and its
# DataLoader workers (/proc, sampled every 50 ms).
TRAIN_SOURCE = """
import os, sys, threading, time
import torch
from torch.utils.data import DataLoader
{spin}
{store_dataset}

def tree():
    me = os.getpid()
    pids = [me]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    threads = rss = 0
    for pid in pids:
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("Threads:"):
                        threads += int(line.split()[1])
                    elif line.startswith("VmRSS:"):
                        rss += int(line.split()[1]) * 1024
        except OSError:
            pass
    return len(pids), threads, rss

peak = [0, 0, 0]
done = threading.Event()
def watch():
    while not done.wait(0.05):
        for k, v in enumerate(tree()):
            peak[k] = max(peak[k], v)

url, files, batch, workers, threads, prefetch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
dataset = StoreDataset(url, ["%05d.bin" % k for k in range(files)], cpu_s={cpu_s})
if threads > 1:
    import pipetune
    dataset = pipetune.concurrent_fetch(dataset, threads)
extra = dict(prefetch_factor=prefetch) if workers > 0 else {{}}
loader = DataLoader(dataset, batch_size=batch, num_workers=workers, shuffle=True,
                    generator=torch.Generator().manual_seed(1), **extra)
threading.Thread(target=watch, daemon=True).start()
began = None
images = 0
started = time.monotonic()
read_seconds = 0.0
for x, i, wall in loader:
    if began is None:
        began = time.monotonic()
    else:
        images += len(i)
        read_seconds += float(wall.sum())
ended = time.monotonic()
done.set()
print("processes %d threads %d rss_bytes %d" % tuple(peak))
# Reads in flight on average from the first batch on, and one read's mean wall time in the run.
print("reads_in_flight %.2f read_seconds %.5f" % (read_seconds / (ended - began), read_seconds / max(1, images)))
print("epoch_images/s %.1f" % ((images + batch) / (ended - started)))
print("images/s %.1f" % (images / (ended - began)))
"""


def train_source(cpu_s=0.0004):
    """The training script's text: each sample one GET and cpu_s of CPU."""
    from _common import SPIN_SOURCE

    return TRAIN_SOURCE.format(spin=SPIN_SOURCE, store_dataset=DATASET_SOURCE, cpu_s=cpu_s)


def parse_train_output(text):
    """{"images_per_second", "epoch_images_per_second", "processes", "threads", "rss_bytes"} from the
    script's output; None without them."""
    out = {}
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["images/s"]:
            out["images_per_second"] = float(words[1])
        elif words[:1] == ["epoch_images/s"]:
            out["epoch_images_per_second"] = float(words[1])
        elif words[:1] == ["reads_in_flight"]:
            out.update(reads_in_flight=float(words[1]), read_seconds=float(words[3]))
        elif words[:1] == ["processes"]:
            out.update(processes=int(words[1]), threads=int(words[3]), rss_bytes=int(words[5]))
    return out if "images_per_second" in out else None


def make_files(root, count, size=4096):
    """`count` files of `size` bytes in root, named 00000.bin, ...; their names."""
    os.makedirs(root, exist_ok=True)
    names = []
    for k in range(count):
        name = "%05d.bin" % k
        with open(os.path.join(root, name), "wb") as f:
            f.write(bytes((k + j) % 251 for j in range(size)))
        names.append(name)
    return names


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "serve":
    serve(*sys.argv[2:])
