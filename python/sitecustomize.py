"""pipetune's Python bootstrap: `pipetune profile` puts this directory first on
PYTHONPATH so that Python runs this file at start-up. It first runs the
sitecustomize that would have run without it (Debian ships one), then installs
import hooks that instrument torch.utils.data.DataLoader and tf.data when (and
only when) the program imports them. See docs/pytorch.md and docs/tfdata.md."""
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

try:
    from pipetune import _session as _pipetune_session, _tfdata as _pipetune_tfdata

    _pipetune_tfdata.install(bool(os.environ.get(_pipetune_session.TRACE_ENV)))
except Exception as _error:  # never stop the user's program
    sys.stderr.write("pipetune: the tf.data bootstrap is off: %r\n" % (_error,))
