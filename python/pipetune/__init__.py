"""pipetune's Python side: records torch DataLoaders through the tracer's C API
(_tracer.py) and applies tuned DataLoader settings (dataloader.py)."""
