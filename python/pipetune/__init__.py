"""pipetune's Python side: records torch DataLoaders through the tracer's C API
(_tracer.py), applies tuned DataLoader settings (dataloader.py), and feeds a
training loop from the engine (pipetune.Loader, loader.py)."""


def __getattr__(name):
    # Imported on first use: sitecustomize imports this package at every start
    # of a profiled Python, which must stay cheap (loader.py needs torch).
    if name == "Loader":
        from pipetune.loader import Loader

        return Loader
    if name == "concurrent_fetch":  # a batch's samples read from several threads (_fetch.py)
        from pipetune._fetch import concurrent_fetch

        return concurrent_fetch
    raise AttributeError("module 'pipetune' has no attribute %r" % name)
