"""pipetune's Python bootstrap: `pipetune profile` puts this directory first on
PYTHONPATH so that Python runs this file at start-up. It first runs the
sitecustomize that would have run without it (Debian ships one), then installs
an import hook that instruments torch.utils.data.DataLoader when (and only
when) the program imports it. See docs/pytorch.md."""
import importlib.machinery
import importlib.util
import os
import sys


def _chain_next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    others = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the chained file's own failure: say it, go on
        sys.stderr.write("pipetune: the chained sitecustomize %s failed: %r\n" % (spec.origin, error))


_chain_next_sitecustomize()

try:
    from pipetune import dataloader as _pipetune_dataloader

    _pipetune_dataloader.install()
except Exception as _error:  # never stop the user's program
    sys.stderr.write("pipetune: the DataLoader bootstrap is off: %r\n" % (_error,))
