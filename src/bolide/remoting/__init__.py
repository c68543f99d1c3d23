"""The asyncio transport of the remoting protocol: servers, client connections, calls.

Imports only :mod:`bolide.common`, :mod:`bolide.protocol` and :mod:`bolide.errors`. Overview
in docs/protocol.md ("Transport").
"""

from bolide.errors import (
    RemotingClosedError,
    RemotingConnectError,
    RemotingError,
    RemotingSendError,
    RemotingTimeoutError,
)
from bolide.remoting.channel import Channel
from bolide.remoting.client import RemotingClient, split_address
from bolide.remoting.hooks import AclClientRPCHook, AclVerifyRPCHook, RPCHook, acl_signature
from bolide.remoting.processor import (
    NOT_NOW,
    NotNow,
    Processor,
    ProcessorTable,
    RequestContext,
    RequestProcessor,
    not_supported,
)
from bolide.remoting.server import RemotingServer, event_loop_factory, run

__all__ = [
    "NOT_NOW",
    "AclClientRPCHook",
    "AclVerifyRPCHook",
    "Channel",
    "NotNow",
    "Processor",
    "ProcessorTable",
    "RPCHook",
    "RemotingClient",
    "RemotingClosedError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingSendError",
    "RemotingServer",
    "RemotingTimeoutError",
    "RequestContext",
    "RequestProcessor",
    "acl_signature",
    "event_loop_factory",
    "not_supported",
    "run",
    "split_address",
]
