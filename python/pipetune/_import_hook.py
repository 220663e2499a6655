"""The one way the bootstrap reaches a library without a change to the
script: a function run on a module right after the library imports it (the
DataLoader's module, tf.data's dataset_ops), or at once when it is imported
already. A failure is said and never breaks the user's import."""
import importlib.abc
import importlib.util
import sys

from pipetune._recorder import warn


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, target, patch, what):
        self.target = target
        self.patch = patch
        self.what = what
        self.busy = False  # find_spec below asks the finders again, this one included

    def find_spec(self, name, path, target=None):
        if name != self.target or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original_exec = spec.loader.exec_module

        def exec_module(module):
            original_exec(module)
            try:
                self.patch(module)
            except Exception as error:  # never break the user's import
                warn("cannot instrument %s: %r" % (self.what, error))

        spec.loader.exec_module = exec_module
        return spec


def patch_on_import(target, patch, what):
    """Runs patch(module) on `target` once it is imported; `what` names the
    library in the warning when it fails."""
    if target in sys.modules:
        patch(sys.modules[target])
    else:
        sys.meta_path.insert(0, _PatchOnImport(target, patch, what))
