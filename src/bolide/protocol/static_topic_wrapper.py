"""RocketMQ's TopicRemappingDetailWrapper: a static topic's configs and mappings by broker after
``updateStaticTopic`` or ``remappingStaticTopic`` plans a change, as the JSON mqadmin writes to
``<tmpdir>/<topic>-<epoch>.before|.after`` and reads back with ``-mf``: fastjson's compact form,
map keys in Java's HashMap order, and an item written twice (a moved queue's items are one list
held by its old and new leader) written again as fastjson's ``{"$ref": path}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bolide.errors import BolideError
from bolide.protocol import fastjson
from bolide.protocol.bodies.broker import TopicConfigAndQueueMapping
from bolide.protocol.bodies.static_topic import TopicQueueMappingDetail
from bolide.protocol.java_order import hash_order

TYPE_CREATE_OR_UPDATE = "CREATE_OR_UPDATE"
TYPE_REMAPPING = "REMAPPING"
SUFFIX_BEFORE = ".before"
SUFFIX_AFTER = ".after"
PERM_RW = 6
_REF_STEP = re.compile(r"\.((?:\\.|[^.\[\\])+)|\[(\d+)\]")
_REF_ESCAPED = re.compile(r"\\(.)")

ConfigMap = dict[str, TopicConfigAndQueueMapping]


class StaticTopicError(BolideError):
    """A static topic's mappings are inconsistent, or the change asked for is impossible."""


@dataclass
class RemappingDetail:
    """RocketMQ's TopicRemappingDetailWrapper: every broker's config and mapping after a change,
    and the brokers that take queues in and give them out (a remapping)."""

    topic: str
    type: str
    epoch: int
    broker_config_map: ConfigMap = field(default_factory=dict)
    broker_to_map_in: list[str] = field(default_factory=list)
    broker_to_map_out: list[str] = field(default_factory=list)

    def to_json(self) -> bytes:
        """The JSON mqadmin writes: fastjson, compact, map and set keys in Java's order, and an
        item already written (one list shared by a queue's old and new leader) written again as
        fastjson's ``{"$ref": path}``."""
        seen: dict[int, str] = {}
        configs = ",".join(f"{_quote(b)}:{_config_json(b, self.broker_config_map[b], seen)}"
                           for b in hash_order(list(self.broker_config_map)))

        def names(values: list[str]) -> str:
            return ",".join(_quote(v) for v in hash_order(values))

        return (f'{{"brokerConfigMap":{{{configs}}},"brokerToMapIn":[{names(self.broker_to_map_in)}],'
                f'"brokerToMapOut":[{names(self.broker_to_map_out)}],"epoch":{self.epoch},'
                f'"topic":{_quote(self.topic)},"type":{_quote(self.type)}}}').encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> RemappingDetail:
        """Read a wrapper file; StaticTopicError naming what is wrong."""
        try:
            obj = _resolve_refs(fastjson.loads(data))
            if not isinstance(obj, dict):
                raise StaticTopicError("the mapping file holds no JSON object")
            configs = {str(b): TopicConfigAndQueueMapping.from_json_obj(c, f"brokerConfigMap[{b!r}]")
                       for b, c in (obj.get("brokerConfigMap") or {}).items()}
            return cls(topic=str(obj.get("topic") or ""), type=str(obj.get("type") or ""),
                       epoch=int(obj.get("epoch") or 0), broker_config_map=configs,
                       broker_to_map_in=[str(b) for b in obj.get("brokerToMapIn") or []],
                       broker_to_map_out=[str(b) for b in obj.get("brokerToMapOut") or []])
        except (ValueError, TypeError, AttributeError, KeyError, IndexError, BolideError) as exc:
            if isinstance(exc, StaticTopicError):
                raise
            raise StaticTopicError(f"the mapping file is no TopicRemappingDetailWrapper ({exc}): give "
                                   "a file updateStaticTopic or remappingStaticTopic wrote") from None

    def write_to(self, directory: str | Path, after: bool) -> Path:
        """Write to ``directory/<topic>-<epoch>.before`` (``.after``) as mqadmin does."""
        path = Path(directory) / f"{self.topic}-{self.epoch}{SUFFIX_AFTER if after else SUFFIX_BEFORE}"
        try:
            path.write_bytes(self.to_json())
        except OSError as exc:
            raise StaticTopicError(f"write file failed {path}: {exc}") from None
        return path


def _quote(text: str) -> str:
    return fastjson.dumps(text).decode()


def _config_json(broker: str, config: TopicConfigAndQueueMapping, seen: dict[int, str]) -> str:
    obj = config.to_json_obj()
    obj.setdefault("attributes", {})  # Java's TopicConfig always has the map
    detail = config.mapping_detail
    if detail is not None:
        hosted: dict[int, list[object]] = {}
        for global_id, items in sorted(detail.hosted_queues.items()):
            written: list[object] = []
            for i, item in enumerate(items):
                ref = seen.get(id(item))
                if ref is None:
                    seen[id(item)] = (f"$.brokerConfigMap.{_path_name(broker)}.mappingDetail"
                                      f".hostedQueues[{global_id}][{i}]")
                    written.append(item.to_json_obj())
                else:
                    written.append({"$ref": ref})
            hosted[global_id] = written
        obj["mappingDetail"]["hostedQueues"] = hosted
    return fastjson.dumps(obj).decode()


def _path_name(name: str) -> str:
    """A map key in a fastjson reference path (ASCII signs escaped with a backslash)."""
    return "".join(ch if ch.isalnum() or ch == "_" or not ch.isascii() else "\\" + ch for ch in name)


def _resolve_refs(root: object) -> object:
    """Replace fastjson's ``{"$ref": "$.a.b[1][0]"}`` objects by what their paths name."""
    def lookup(path: str) -> object:
        node = root
        for name, index in _REF_STEP.findall(path[1:]):
            key: str | int = _REF_ESCAPED.sub(r"\1", name) if name else int(index)
            if isinstance(node, dict):
                node = node[key] if key in node else node[str(key) if isinstance(key, int) else int(key)]
            elif isinstance(node, list) and isinstance(key, int):
                node = node[key]
            else:
                raise StaticTopicError(f"the reference {path!r} names nothing in the file")
        return node

    def walk(node: object) -> object:
        if isinstance(node, dict):
            if set(node) == {"$ref"} and isinstance(node["$ref"], str):
                return walk(lookup(node["$ref"]))
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(root)


def copy_configs(configs: Mapping[str, TopicConfigAndQueueMapping]) -> ConfigMap:
    """A deep copy (plans change the configs they are given, as RocketMQ's do)."""
    return {b: TopicConfigAndQueueMapping.decode(c.encode()) for b, c in configs.items()}


def new_config(topic: str, broker: str, total_queues: int, epoch: int) -> TopicConfigAndQueueMapping:
    """A broker's config with no queues yet (RocketMQ's ``new TopicConfig(topic, 0, 0)``)."""
    return TopicConfigAndQueueMapping(
        topic_name=topic, read_queue_nums=0, write_queue_nums=0, perm=PERM_RW, attributes={},
        mapping_detail=TopicQueueMappingDetail(topic=topic, total_queues=total_queues, bname=broker,
                                               epoch=epoch))
