"""The store's optional compiled modules (``_fastscan``, ``_append``, ``_index``), built by
``pip install`` when a C compiler is there. Each has a pure-Python twin that gives the same
results; ``BOLIDE_PURE_PYTHON=1`` keeps the compiled ones out."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def load(name: str) -> ModuleType | None:
    """``bolide.store.<name>``, or None when it is not built or pure Python is asked for."""
    if os.environ.get("BOLIDE_PURE_PYTHON") == "1":
        return None
    try:
        return importlib.import_module(f"bolide.store.{name}")
    except ImportError:
        return None
