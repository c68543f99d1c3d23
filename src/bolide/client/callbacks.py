"""Checks of the functions users hand the client (listeners, executors)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from bolide.client.errors import ClientConfigError


def require_arguments(fn: Callable[..., Any], count: int, what: str, example: str) -> None:
    """ClientConfigError unless ``fn`` can be called with ``count`` positional arguments: a
    callback of the wrong signature would otherwise fail each time it is called, later."""
    try:
        inspect.signature(fn).bind(*([None] * count))
    except TypeError:
        raise ClientConfigError(f"{what} {fn!r} must take {count} argument{'s' if count > 1 else ''}: "
                                f"{example}") from None
    except ValueError:  # no signature to read (a builtin): called as it is
        pass
