"""Value types shared by every layer: messages, system flags, properties, message ids, topics."""

from bolide.common.hashing import java_string_hash
from bolide.common.message import Message, MessageExt
from bolide.common.topic import validate_topic

__all__ = ["Message", "MessageExt", "java_string_hash", "validate_topic"]
