"""Plans of static topic changes (RocketMQ 5.3.3's TopicQueueMappingUtils, pure: no network):
the mapping every broker gets when ``updateStaticTopic`` creates or grows a static topic, or
when ``remappingStaticTopic`` moves its logic queues onto other brokers, with RocketMQ's checks
of the mappings the brokers hold.

A plan works on the brokers' TopicConfigAndQueueMapping by broker name (what GET_TOPIC_CONFIG
answers) and returns a :class:`RemappingDetail`: RocketMQ's TopicRemappingDetailWrapper, the
JSON mqadmin writes to ``<tmpdir>/<topic>-<epoch>.before|.after`` and reads back with ``-mf``.

The queues are allocated as RocketMQ's MappingAllocator does: each next queue goes to one of
the brokers holding the fewest, picked at random for a new topic, and for a remapping the one
that led the most queues before (ties in the order Java's HashMap walks the broker names), so
the same inputs give the same assignment as mqadmin's.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bolide.errors import BolideError
from bolide.protocol import fastjson
from bolide.protocol.bodies.broker import TopicConfigAndQueueMapping
from bolide.protocol.bodies.static_topic import (
    LogicQueueMappingItem,
    TopicQueueMappingDetail,
    check_item_offsets,
)
from bolide.protocol.java_order import hash_order, put_all_capacity

TYPE_CREATE_OR_UPDATE = "CREATE_OR_UPDATE"
TYPE_REMAPPING = "REMAPPING"
SUFFIX_BEFORE = ".before"
SUFFIX_AFTER = ".after"
BLOCK_SEQ_SIZE = 10000  # mqadmin's step between an old leader's end and the new one's start
PERM_RW = 6
_REF_STEP = re.compile(r"\.((?:\\.|[^.\[\\])+)|\[(\d+)\]")
_REF_ESCAPED = re.compile(r"\\(.)")

ConfigMap = dict[str, TopicConfigAndQueueMapping]
Shuffle = Callable[[list[str]], None]


class StaticTopicError(BolideError):
    """A static topic's mappings are inconsistent, or the change asked for is impossible."""


@dataclass
class MappingOne:
    """A logic queue and its items as its leader broker holds them (TopicQueueMappingOne)."""

    global_id: int
    bname: str
    items: list[LogicQueueMappingItem]
    detail: TopicQueueMappingDetail


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
                    seen[id(item)] = f"$.brokerConfigMap.{_path_name(broker)}.mappingDetail.hostedQueues[{global_id}][{i}]"
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
            key: object = _REF_ESCAPED.sub(r"\1", name) if name else int(index)
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


# -- checks (RocketMQ's, with the fix named) -----------------------------------------------------
def _detail(broker: str, config: TopicConfigAndQueueMapping) -> TopicQueueMappingDetail:
    if config.mapping_detail is None:
        raise StaticTopicError(f"Mapping info should not be null in broker {broker}: topic "
                               f"{config.topic_name!r} is a normal topic there; give a static topic "
                               "a name no broker uses, or delete the topic first")
    return config.mapping_detail


def check_name_epoch_num(topic: str | None, configs: Mapping[str, TopicConfigAndQueueMapping]
                         ) -> tuple[int, int] | None:
    """The brokers' common (epoch, total queues) (checkNameEpochNumConsistence); None for no
    broker."""
    if not configs:
        return None
    epoch = num = -1
    scope: str | None = None
    for broker, config in configs.items():
        detail = _detail(broker, config)
        fix = "; repair it with updateStaticTopic -mf <a corrected mapping file> -fr true"
        if broker != detail.bname:
            raise StaticTopicError(f"The broker name is not equal {broker} != {detail.bname}{fix}")
        if detail.dirty:
            raise StaticTopicError(f"The mapping info is dirty in broker {broker}{fix}")
        if config.topic_name != detail.topic:
            raise StaticTopicError(f"The topic name is inconsistent in broker {broker}{fix}")
        if topic is not None and topic != detail.topic:
            raise StaticTopicError(f"The topic name is not match for broker {broker}: the mapping is "
                                   f"of {detail.topic!r}, not {topic!r}")
        if scope is not None and scope != detail.scope:
            raise StaticTopicError(f"scope does not match {detail.scope} != {scope} in {broker}{fix}")
        scope = detail.scope
        if epoch != -1 and epoch != detail.epoch:
            raise StaticTopicError(f"epoch does not match {epoch} != {detail.epoch} in {detail.bname}: "
                                   "an earlier change stopped half way; finish it with "
                                   "remappingStaticTopic -mf <its .after file>, or repair it"
                                   f"{fix[1:]}")
        epoch = detail.epoch
        if num != -1 and num != detail.total_queues:
            raise StaticTopicError(f"total queue number does not match {num} != {detail.total_queues} "
                                   f"in {detail.bname}{fix}")
        num = detail.total_queues
    return epoch, num


def build_mapping_items(details: Iterable[TopicQueueMappingDetail], replace: bool = False,
                        check_consistence: bool = True) -> dict[int, MappingOne]:
    """Every logic queue with its leader's items (checkAndBuildMappingItems): each queue led by
    exactly one broker, its items in order, queues 0..total-1 all there."""
    ordered = sorted(details, key=lambda d: -d.epoch)  # a stable sort, newest epoch first
    max_num = 0
    found: dict[int, MappingOne] = {}
    for detail in ordered:
        max_num = max(max_num, detail.total_queues)
        for global_id, items in detail.hosted_queues.items():
            problem = check_item_offsets(items)
            if problem is not None:
                raise StaticTopicError(f"logic queue {global_id} on broker {detail.bname}: {problem}")
            if not items or items[-1].bname != detail.bname:
                continue  # not the leader
            if global_id in found:
                if not replace:
                    raise StaticTopicError(
                        f"The queue id is duplicated in broker {found[global_id].bname} {detail.bname}: "
                        f"both lead logic queue {global_id}; repair one with updateStaticTopic -mf "
                        "<a corrected mapping file> -fr true")
            else:
                found[global_id] = MappingOne(global_id, detail.bname, items, detail)
    if check_consistence:
        if max_num != len(found):
            raise StaticTopicError(f"The total queue number in config does not match the real hosted "
                                   f"queues {max_num} != {len(found)}: a broker holding some is missing "
                                   "(start it, or check that it registers with this NameServer)")
        for i in range(max_num):
            if i not in found:
                raise StaticTopicError(f"The queue number {i} is not in globalIdMap")
    check_reuse_physical_queue(found.values())
    return dict(sorted(found.items()))


def check_reuse_physical_queue(ones: Iterable[MappingOne]) -> None:
    """No physical queue serves two logic queues (checkIfReusePhysicalQueue)."""
    seen: dict[str, MappingOne] = {}
    for one in ones:
        for item in one.items:
            key = f"{item.bname}-{item.queue_id}"
            if key in seen:
                raise StaticTopicError(f"Topic {one.detail.topic} global queue id {one.global_id} and "
                                       f"{seen[key].global_id} shared the same physical queue {key}")
            seen[key] = one


def check_physical_queues(configs: Mapping[str, TopicConfigAndQueueMapping]) -> None:
    """Every item's physical queue is among its broker's write queues, and starts at 0
    (checkPhysicalQueueConsistence)."""
    for broker, config in configs.items():
        if config.read_queue_nums < config.write_queue_nums:
            raise StaticTopicError(f"Read queues is smaller than write queues on broker {broker}: "
                                   "set them equal with updateTopic -r/-w")
        for items in _detail(broker, config).hosted_queues.values():
            for item in items:
                if item.start_offset != 0:
                    raise StaticTopicError(f"The start offset does not begin from 0: {item}")
                owner = configs.get(item.bname)
                if owner is None:
                    raise StaticTopicError(f"The broker of item does not exist: {item.bname} (of {item}) "
                                           "has no config of the topic; start it, or check its name")
                if item.queue_id >= owner.write_queue_nums:
                    raise StaticTopicError(f"The physical queue id is overflow the write queues: {item} "
                                           f"on {item.bname}, which has {owner.write_queue_nums}")


def check_leaders_in_targets(ones: Iterable[MappingOne], targets: set[str]) -> None:
    for one in ones:
        if one.bname not in targets:
            raise StaticTopicError(f"The leader broker does not in target broker: {one.bname} leads "
                                   f"logic queue {one.global_id}")


def check_targets_complete(targets: set[str], configs: Mapping[str, TopicConfigAndQueueMapping]) -> None:
    for broker, config in configs.items():
        if not _detail(broker, config).hosted_queues:
            continue
        if broker not in targets:
            raise StaticTopicError(f"The existed broker {broker} does not in target brokers: add it "
                                   "to -b, or move its queues away with remappingStaticTopic first")


def block_seq_round_up(offset: int, block: int = BLOCK_SEQ_SIZE) -> int:
    """The next block boundary past ``offset``, a whole block more when past half a block
    (blockSeqRoundUp): a new leader's first logic offset."""
    num, left = divmod(offset, block)
    return (num + 1) * block if left < block // 2 else (num + 2) * block


def _recheck(topic: str, configs: ConfigMap) -> dict[int, MappingOne]:
    check_name_epoch_num(topic, configs)
    ones = build_mapping_items(_details(configs))
    check_physical_queues(configs)
    return ones


def _details(configs: Mapping[str, TopicConfigAndQueueMapping]) -> list[TopicQueueMappingDetail]:
    return [c.mapping_detail for c in configs.values() if c.mapping_detail is not None]


# -- the allocator --------------------------------------------------------------------------------
class MappingAllocator:
    """RocketMQ's MappingAllocator: queue ids past the assigned ones go, one at a time, to a
    broker with the fewest queues. Among those, a remapping (``before``: each broker's queue
    count before it) takes them in the order of that count (stable over Java's HashMap order),
    first the last, then from the front; a new topic in a random order (``shuffle``)."""

    def __init__(self, id_to_broker: Mapping[int, str], broker_num: Mapping[str, int],
                 before: Mapping[str, int] | None = None, shuffle: Shuffle = random.shuffle) -> None:
        order = hash_order(list(broker_num), put_all_capacity(len(broker_num)))  # its own HashMap
        self.broker_num: dict[str, int] = {b: broker_num[b] for b in order}
        self.id_to_broker: dict[int, str] = dict(id_to_broker)
        self.before = before
        self.shuffle = shuffle
        self.least: list[str] = []
        self.current = 0

    def _fresh(self) -> None:
        low = min(self.broker_num.values())
        self.least = [b for b, n in self.broker_num.items() if n == low]
        if self.before:
            before = self.before
            self.least.sort(key=lambda b: before.get(b, 0))
        else:
            self.shuffle(self.least)
        self.current = len(self.least) - 1

    def _next(self) -> str:
        if not self.least:
            self._fresh()
        return self.least.pop(self.current % len(self.least))

    def up_to(self, total: int) -> dict[int, str]:
        """Assign queue ids up to ``total``; every queue id's broker."""
        for queue_id in range(len(self.id_to_broker), total):
            broker = self._next()
            self.broker_num[broker] = self.broker_num.get(broker, 0) + 1
            self.id_to_broker[queue_id] = broker
        return self.id_to_broker


def _target_counts(targets: Iterable[str]) -> dict[str, int]:
    """``new HashMap`` of the targets (a HashSet's order) with 0 queues each."""
    return {b: 0 for b in hash_order(list(targets))}


# -- the plans ------------------------------------------------------------------------------------
def create_plan(topic: str, queue_num: int, targets: Iterable[str], configs: Mapping[str, TopicConfigAndQueueMapping],
                *, now_ms: int | None = None, shuffle: Shuffle = random.shuffle) -> RemappingDetail:
    """The mappings after creating ``topic`` with ``queue_num`` logic queues, or growing it to
    that many, on ``targets`` (createTopicConfigMapping); ``configs`` are the brokers' current
    ones (empty for a new topic) and are not changed."""
    if queue_num <= 0:
        raise StaticTopicError(f"the total queue num must be positive, not {queue_num}: give -qn N")
    configs = copy_configs(configs)
    target_set = set(targets) | set(configs)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    check_targets_complete(target_set, configs)
    max_epoch = now
    ones: dict[int, MappingOne] = {}
    if configs:
        checked = check_name_epoch_num(topic, configs)
        assert checked is not None
        max_epoch = checked[0]
        ones = build_mapping_items(_details(configs))
        check_physical_queues(configs)
    if queue_num < len(ones):
        raise StaticTopicError(f"Cannot decrease the queue num for static topic {queue_num} < {len(ones)}: "
                               f"give -qn {len(ones)} or more")
    if queue_num == len(ones):
        raise StaticTopicError("The topic queue num is equal the existed queue num, do nothing: give "
                               f"-qn above {queue_num} to add queues, or move them with remappingStaticTopic")
    counts = _target_counts(target_set)
    old_ids: dict[int, str] = {}
    for global_id, one in ones.items():
        old_ids[global_id] = one.bname
        counts[one.bname] = counts.get(one.bname, 0) + 1
    assigned = MappingAllocator(old_ids, counts, None, shuffle).up_to(queue_num)
    epoch = max(max_epoch + 1000, now)
    for global_id in sorted(assigned):
        broker = assigned[global_id]
        if global_id in ones:
            continue
        config = configs.get(broker)
        if config is None:
            config = configs[broker] = new_config(topic, broker, 0, now)
        config.write_queue_nums += 1
        config.read_queue_nums += 1
        detail = _detail(broker, config)
        detail.hosted_queues[global_id] = [LogicQueueMappingItem(
            gen=0, queue_id=config.write_queue_nums - 1, bname=broker, logic_offset=0, start_offset=0)]
    for broker, config in configs.items():
        detail = _detail(broker, config)
        detail.epoch, detail.total_queues = epoch, queue_num
    _recheck(topic, configs)
    return RemappingDetail(topic, TYPE_CREATE_OR_UPDATE, epoch, configs)


def remapping_plan(topic: str, configs: Mapping[str, TopicConfigAndQueueMapping], targets: Iterable[str],
                   *, now_ms: int | None = None) -> RemappingDetail:
    """The mappings after moving ``topic``'s logic queues onto ``targets``, as evenly as can be
    with the fewest moves (remappingStaticTopic): a moved queue gets a new item on its new
    broker (the next physical queue there, logic offset -1 until the old leader's end is known,
    see :func:`decide_logic_offsets`). ``configs`` are not changed."""
    configs = copy_configs(configs)
    target_list = list(dict.fromkeys(targets))
    if not target_list:
        raise StaticTopicError("Find none brokers, do nothing: give -b brokers or -c clusters")
    checked = check_name_epoch_num(topic, configs)
    if checked is None:
        raise StaticTopicError(f"No topic route to do the remapping: no broker holds static topic {topic!r}; "
                               "create it with updateStaticTopic")
    max_epoch, max_num = checked
    ones = build_mapping_items(_details(configs))
    check_physical_queues(configs)
    before: dict[str, int] = {}
    for one in ones.values():
        before[one.bname] = before.get(one.bname, 0) + 1
    allocator = MappingAllocator({}, _target_counts(target_list), before)
    allocator.up_to(max_num)
    expected = allocator.broker_num
    waiting: list[int] = []
    expected_ids: dict[int, str] = {}
    for global_id, one in ones.items():  # a broker either keeps/gets queues or gives them away
        if one.bname in expected:
            if expected[one.bname] > 0:
                expected_ids[global_id] = one.bname
                expected[one.bname] -= 1
            else:
                waiting.append(global_id)
                del expected[one.bname]
        else:
            waiting.append(global_id)
    for broker, num in expected.items():
        for _ in range(num):
            expected_ids[waiting.pop(0)] = broker
    epoch = max(max_epoch + 1000, int(time.time() * 1000) if now_ms is None else now_ms)
    map_in: list[str] = []
    map_out: list[str] = []
    for global_id in sorted(expected_ids):
        broker, one = expected_ids[global_id], ones[global_id]
        if one.bname == broker:
            continue
        map_in.append(broker)
        map_out.append(one.bname)
        into = configs.get(broker)
        if into is None:
            into = configs[broker] = new_config(topic, broker, max_num, epoch)
        into.write_queue_nums += 1
        into.read_queue_nums += 1
        items = [*one.items, LogicQueueMappingItem(gen=one.items[-1].gen + 1, queue_id=into.write_queue_nums - 1,
                                                   bname=broker, logic_offset=-1, start_offset=0)]
        _detail(broker, into).hosted_queues[global_id] = items  # one list for both, as RocketMQ
        _detail(one.bname, configs[one.bname]).hosted_queues[global_id] = items
    for broker, config in configs.items():
        detail = _detail(broker, config)
        detail.epoch, detail.total_queues = epoch, max_num
    check_leaders_in_targets(_recheck(topic, configs).values(), set(target_list))
    return RemappingDetail(topic, TYPE_REMAPPING, epoch, configs, list(dict.fromkeys(map_in)),
                           list(dict.fromkeys(map_out)))


def decide_logic_offsets(plan: RemappingDetail, broker: str, max_offsets: Mapping[tuple[str, int], int],
                         block: int = BLOCK_SEQ_SIZE) -> None:
    """Set the logic offset of each queue ``broker`` gives away (mqadmin remapping's step 3): the
    old leader's end (``max_offsets`` by (broker name, physical queue id), from
    GET_TOPIC_STATS_INFO) as a logic offset, rounded up to a block."""
    config = plan.broker_config_map[broker]
    for global_id, items in _detail(broker, config).hosted_queues.items():
        if len(items) < 2:
            continue
        new_leader, old_leader = items[-1], items[-2]
        if new_leader.logic_offset > 0:
            continue
        end = max_offsets.get((old_leader.bname, old_leader.queue_id))
        if end is None:
            raise StaticTopicError(f"Cannot get the max offset for old leader {old_leader}: broker "
                                   f"{old_leader.bname} has no queue {old_leader.queue_id} of {plan.topic}")
        if end < old_leader.start_offset:
            raise StaticTopicError(f"The max offset is smaller then the start offset {old_leader} {end}")
        new_leader.logic_offset = block_seq_round_up(old_leader.static_offset_strictly(end), block)
        leader_config = plan.broker_config_map.get(new_leader.bname)
        if leader_config is not None:  # the new leader holds the very same items
            _detail(new_leader.bname, leader_config).hosted_queues[global_id] = items


def write_order(brokers: Iterable[str]) -> list[str]:
    """Brokers in the order RocketMQ's HashMap/HashSet of them is walked (its write order)."""
    return hash_order(list(brokers))
