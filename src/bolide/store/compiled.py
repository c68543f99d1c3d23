"""The store's optional compiled modules (``_fastscan``, ``_append``, ``_index``): see
:mod:`bolide.common.compiled`."""

from __future__ import annotations

from types import ModuleType

from bolide.common import compiled


def load(name: str) -> ModuleType | None:
    """``bolide.store.<name>``, or None when it is not built or pure Python is asked for."""
    return compiled.load(f"bolide.store.{name}")
