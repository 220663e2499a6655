"""Watching a process end: sys.exit's status and an uncaught exception are
noted (a trace with no clean end is a process that was killed), and the
session is ended at the interpreter's exit and at a multiprocessing child's
(which leaves by os._exit, after its finalizers, not atexit)."""
import atexit
import sys


def watch(note, stop):
    """Calls note(status=..., exception=...) when the process says how it
    is ending, and stop() once at its end. Installed once per process; the
    program's own sys.exit and excepthook still run, unchanged."""
    original_exit = sys.exit
    if not getattr(original_exit, "_pipetune", False):
        def exit_noting(status=None):
            code = 0 if status is None else status if isinstance(status, int) else 1
            try:
                if code != 0:
                    note(status=code)
            except Exception:
                pass
            original_exit(status)

        exit_noting._pipetune = True
        sys.exit = exit_noting
    original_hook = sys.excepthook
    if not getattr(original_hook, "_pipetune", False):
        def hook_noting(kind, value, traceback):
            try:
                note(status=1, exception="%s: %s" % (kind.__name__, str(value)[:200]))
            except Exception:
                pass
            original_hook(kind, value, traceback)

        hook_noting._pipetune = True
        sys.excepthook = hook_noting
    atexit.register(stop)
    try:
        from multiprocessing import util

        util.Finalize(None, stop, exitpriority=-10)
    except Exception:
        pass
