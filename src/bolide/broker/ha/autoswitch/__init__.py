"""Replication in RocketMQ 5's controller mode (AutoSwitchHAService), wire-compatible."""

from bolide.broker.ha.autoswitch.config import AutoSwitchHAConfig
from bolide.broker.ha.autoswitch.service import AutoSwitchHA, HAStateError

__all__ = ["AutoSwitchHA", "AutoSwitchHAConfig", "HAStateError"]
