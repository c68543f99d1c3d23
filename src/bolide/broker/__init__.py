"""The Broker: request processors over the message store, topic and offset managers, long
polling and registration with the NameServers."""

from bolide.broker.config import BrokerConfig
from bolide.broker.controller import BrokerController

__all__ = ["BrokerConfig", "BrokerController"]
