"""How each consumer group takes each topic's messages when the broker allocates its queues
(RocketMQ 5's MessageRequestModeManager): PULL or POP, set by ``mqadmin setConsumeMode`` /
``bolide admin setConsumeMode``, kept in ``config/messageRequestMode.json`` as RocketMQ does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bolide.errors import ConfigError, ProtocolError
from bolide.protocol.bodies.pop import MessageRequestModeTable, SetMessageRequestModeRequestBody
from bolide.store.config_files import JsonConfigFile


class MessageRequestModes(JsonConfigFile):
    """topic -> group -> :class:`SetMessageRequestModeRequestBody`; replaced, never changed in
    place, so reads need no lock."""

    FILE_NAME = "messageRequestMode.json"
    WHAT = "the consumer groups' request modes"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.table: dict[str, dict[str, SetMessageRequestModeRequestBody]] = {}

    def get(self, topic: str, group: str) -> SetMessageRequestModeRequestBody | None:
        return self.table.get(topic, {}).get(group)

    def set(self, mode: SetMessageRequestModeRequestBody) -> None:
        with self._lock:
            table = dict(self.table)
            table[mode.topic] = {**table.get(mode.topic, {}), mode.consumer_group: mode}
            self.table = table

    def to_json_obj(self) -> dict[str, Any]:
        return MessageRequestModeTable(self.table).to_json_obj()

    def _apply(self, obj: dict[str, Any] | None) -> None:
        try:
            table = MessageRequestModeTable.from_json_obj(obj or {})
        except ProtocolError as exc:
            raise ConfigError(str(exc)) from None
        self.table = table.message_request_mode_map
