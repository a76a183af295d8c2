"""The command line's own dependency, rich, comes with the ``cli`` extra: ``pip install 'oncegate[cli]'``.

The Azure deployment and ``make run`` install the service's dependencies only, and ``oncegate serve``
runs on those: the tables the other commands draw (``oncegate.cli.layout`` and the renderers on it)
are loaded the first time a command draws one, and without rich that command says which extra to
install, exit 2.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

EXTRA = "cli"
# The distributions of the extra, as ModuleNotFoundError names them.
NEEDED = ("rich",)
MISSING = f"oncegate: this command needs the command line's extra; install it with: pip install 'oncegate[{EXTRA}]'"
MISSING_EXIT = 2


def on_first_use(name: str) -> ModuleType:
    """The module ``name``, run only when one of its attributes is first read (the standard library's LazyLoader)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    assert spec is not None, name
    assert spec.loader is not None, name
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def require() -> None:
    """Import what the extra brings; without it, ``ModuleNotFoundError`` names it before a command starts."""
    for name in NEEDED:
        importlib.import_module(name)


def is_missing(exc: ModuleNotFoundError) -> bool:
    """Whether the module not found is the extra's (and not a bug's)."""
    return (exc.name or "").partition(".")[0] in NEEDED
