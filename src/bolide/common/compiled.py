"""Bolide's optional compiled modules (the store's loops, the protocol codec's hot paths),
built by ``pip install`` when a C compiler is there. Each has a pure-Python twin that gives
the same results; ``BOLIDE_PURE_PYTHON=1`` keeps the compiled ones out."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def load(module: str) -> ModuleType | None:
    """The compiled module ``module`` (a full name), or None when it is not built or pure
    Python is asked for."""
    if os.environ.get("BOLIDE_PURE_PYTHON") == "1":
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
