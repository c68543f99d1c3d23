"""RocketMQ 5 controller mode on the broker: registration with the controller, heartbeats and
role changes at runtime (automatic failover)."""
