"""Classic master/slave replication, wire-compatible with RocketMQ 4.9.x HA."""

from bolide.broker.ha.master import HAMaster
from bolide.broker.ha.slave import HASlave

__all__ = ["HAMaster", "HASlave"]
