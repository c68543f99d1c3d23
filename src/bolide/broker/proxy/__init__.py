"""RocketMQ 5's gRPC API served by the broker (what RocketMQ's proxy does in "local" mode)."""

from bolide.broker.proxy.server import GrpcEndpoint

__all__ = ["GrpcEndpoint"]
