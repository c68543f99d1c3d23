"""fastjson-shaped JSON for the protocol codec: :mod:`bolide.common.fastjson` with parse errors
raised as :class:`~bolide.errors.ProtocolError`."""

from __future__ import annotations

from typing import Any

from bolide.common import fastjson as _common
from bolide.common.fastjson import MAX_DEPTH, JSONError, dumps, dumps_pretty, loads_strict
from bolide.errors import ProtocolError

__all__ = ["MAX_DEPTH", "JSONError", "dumps", "dumps_pretty", "loads", "loads_strict"]


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON as a Java peer would accept it; raises ProtocolError when it cannot."""
    try:
        return _common.loads(data)
    except JSONError as exc:
        raise ProtocolError(str(exc)) from None


class _Parser(_common._Parser):
    """The lenient parser, raising ProtocolError."""

    __slots__ = ()

    def parse(self) -> Any:
        try:
            return super().parse()
        except JSONError as exc:
            raise ProtocolError(str(exc)) from None
