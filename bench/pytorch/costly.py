"""The dataset the PyTorch benchmarks' training scripts read: each sample
costs CPU, spun on the thread's own clock so that other load on the machine
does not change it (as decoding or augmenting is CPU work), and a wait off
the CPU (as reading is). Its source goes into each script the benchmarks
write (costly_dataset), so that every benchmark's samples are built the
same way."""

_SOURCE = '''
def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Costly(Dataset):
    def __init__(self, n, scale=1.0):
        self.n, self.scale = n, scale

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        spin({cpu} * self.scale)
        time.sleep({wait} * self.scale)
        return {item}

'''


def costly_dataset(cpu, wait, item):
    """The source of `spin` and `Costly` (the script imports time, torch and
    Dataset): each sample costs `cpu` seconds of CPU and `wait` seconds off
    it, times the dataset's scale, and is the Python expression `item` of i."""
    return _SOURCE.format(cpu=cpu, wait=wait, item=item)
