"""Bolide: a message broker in Python, wire- and file-compatible with Apache RocketMQ."""

__version__ = "0.1.0"
