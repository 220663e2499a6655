"""The steady rate of a loader, measured one way for every side of
compare.sh (torch_dataloader.py, peers.py): images counted from the first
batch, which is warm-up and excluded, until `seconds` have passed."""
import time


def steady_window(batches, seconds, on_batch=None):
    """Returns (steady images/s, images taken in all, first batch included).
    `on_batch` runs after each batch arrives (to read the workers' CPU
    while they are alive)."""
    first = last = None
    images = total = 0
    for batch in batches:
        now = time.perf_counter()
        total += batch.shape[0]
        if on_batch is not None:
            on_batch()
        if first is None:
            first = now
            continue
        images += batch.shape[0]
        last = now
        if now - first >= seconds:
            break
    window = (last - first) if last is not None else 0.0
    return (images / window if window > 0 else 0.0), total
