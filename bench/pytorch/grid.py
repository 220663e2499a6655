"""The settings the PyTorch benchmarks run side by side: the tuned keyword
arguments against a grid of num_workers, each a file the bootstrap applies
(PIPETUNE_DATALOADER_APPLY or `pipetune profile --apply`), so that every
benchmark's grid is written the same way."""
import json
import os


def grid_settings(tmp, tuned, grid):
    """[(name, kwargs file)]: ("tuned", `tuned`) first, then one file in
    `tmp` per number of workers in `grid` ("0,1,2"), named
    "num_workers=N"."""
    settings = [("tuned", tuned)]
    for n in [int(x) for x in grid.split(",")]:
        path = os.path.join(tmp, "grid%d.json" % n)
        with open(path, "w") as f:
            json.dump({"num_workers": n}, f)
        settings.append(("num_workers=%d" % n, path))
    return settings
