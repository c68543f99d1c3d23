"""RocketMQ 5's controller (controller mode, automatic master failover) for one-node groups.

Brokers with ``enableControllerMode=true`` apply for an id, register, send heartbeats
(BROKER_HEARTBEAT 904) and report their in-sync replicas; the controller elects a master per
broker group from them, bumps the master epoch and tells the brokers (1008).

Modules: :mod:`.config` (ControllerConfig keys), :mod:`.events` and :mod:`.replicas` (the state
and the events that change it, pure), :mod:`.decisions` (each request's answer and events,
RocketMQ's ReplicasInfoManager), :mod:`.elect` (DefaultElectPolicy), :mod:`.heartbeat` (broker
liveness), :mod:`.event_log` (durable events), :mod:`.processor` (request codes) and
:mod:`.server` (the process: socket, timers, notifications).
"""

from bolide.controller.config import ControllerConfig
from bolide.controller.server import ControllerServer

__all__ = ["ControllerConfig", "ControllerServer"]
