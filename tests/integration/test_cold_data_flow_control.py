"""RocketMQ 5's cold data flow control against an in-process NameServer + Broker: a consumer
group that reads more cold data (far behind the CommitLog's end) than its threshold is
throttled on its next cold pull (SYSTEM_BUSY for a push consumer, a held pull answered with one
message for a pull consumer) while other groups, hot reads and system groups are not; the three
``bolide admin`` commands and the Admin calls."""

from __future__ import annotations

import time
from pathlib import Path

from test_cli_admin import ServerThread, admin_json, admin_table, bolide, started

from bolide.broker.cold_data import ColdDataFlowControl
from bolide.client import Message
from bolide.client.blocking import Admin, Producer
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from bolide.protocol.headers.consumer import PullMessageRequestHeader
from bolide.remoting import RemotingClient

TOPIC = "ColdTopic"
COUNT = 20
BODY = 1000  # each record a little over 1 KB
# "physical memory" of 10 000 bytes: accessMessageInMemoryHotRatio 26 % leaves 2600 bytes, so the
# messages more than about 2 records behind the CommitLog's end are cold
SMALL_MEMORY = 10_000
THRESHOLD = 4000  # cgColdReadThreshold: a group is past it after 4 cold messages
BUSY = "This consumer group is reading cold data. It has been flow control"


def _pull(group: str, offset: int, max_nums: int = 4) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, PullMessageRequestHeader(
        consumer_group=group, topic=TOPIC, queue_id=0, queue_offset=offset, max_msg_nums=max_nums,
        sys_flag=4, commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0))


def _beat(groups: dict[str, str]) -> RemotingCommand:
    beat = HeartbeatData(client_id="10.1.1.1@cold", consumer_data_set=[
        ConsumerData(group_name=group, consume_type=kind, message_model="CLUSTERING",
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     subscription_data_set=[SubscriptionData.of(TOPIC, "*")])
        for group, kind in groups.items()])
    return RemotingCommand.request(RequestCode.HEART_BEAT, None, beat.encode())


def _setup(st: ServerThread) -> str:
    """The topic with COUNT messages; the broker's accounting on a clock that stands still (the
    5 s windows do not end during the test). Returns the broker's address."""
    assert st.servers is not None
    broker = st.servers.broker
    now = int(time.time() * 1000)
    broker.cold_data = ColdDataFlowControl(lambda: broker.config, clock=lambda: now)
    ns = st.servers.namesrv_addr
    admin_json(ns, "updateTopic", "-t", TOPIC, "-r", "1", "-w", "1")
    with Producer(ns, group="cold-pg") as producer:
        for i in range(COUNT):
            producer.send(Message(TOPIC, b"%04d" % i + b"x" * (BODY - 4)))
    return st.servers.broker_addr


def test_a_group_past_its_cold_read_threshold_is_throttled_and_others_are_not(tmp_path: Path) -> None:
    with started(tmp_path / "store", store_options={"total_physical_memory_bytes": SMALL_MEMORY},
                 cold_data_flow_control_enable=True, cg_cold_read_threshold=THRESHOLD) as st:
        addr = _setup(st)

        async def scenario() -> dict[str, object]:
            client = RemotingClient()
            try:
                beat = await client.invoke(addr, _beat({"push-cold": "CONSUME_PASSIVELY",
                                                        "light": "CONSUME_PASSIVELY",
                                                        "pull-cold": "CONSUME_ACTIVELY"}))
                assert beat.code == ResponseCode.SUCCESS, beat
                out: dict[str, object] = {}
                first = await client.invoke(addr, _pull("push-cold", 0))  # 4 cold messages: past 4000 bytes
                out["first"] = (first.code, first.ext_fields.get("nextBeginOffset"))
                busy = await client.invoke(addr, _pull("push-cold", 4))
                out["busy"] = (busy.code, busy.remark)
                hot = await client.invoke(addr, _pull("push-cold", COUNT - 1))  # the newest: hot
                out["hot"] = hot.code
                light = [await client.invoke(addr, _pull("light", i, 1)) for i in range(3)]
                out["light"] = [r.code for r in light]
                tools = [await client.invoke(addr, _pull("TOOLS_CONSUMER", i)) for i in (0, 4, 8)]
                out["tools"] = [r.code for r in tools]
                await client.invoke(addr, _pull("pull-cold", 0))
                began = time.monotonic()
                held = await client.invoke(addr, _pull("pull-cold", 4), 10_000)  # held, then one message
                out["held"] = (held.code, time.monotonic() - began, held.ext_fields.get("nextBeginOffset"))
                return out
            finally:
                await client.close()

        out = st.run(scenario())
        assert out["first"] == (ResponseCode.SUCCESS, "4")
        assert out["busy"] == (ResponseCode.SYSTEM_BUSY, BUSY)
        assert out["hot"] == ResponseCode.SUCCESS  # past the threshold, but not reading cold data
        assert out["light"] == [ResponseCode.SUCCESS] * 3  # 3 KB: under the threshold
        assert out["tools"] == [ResponseCode.SUCCESS] * 3  # a system group: never throttled
        code, waited, next_offset = out["held"]  # type: ignore[misc]
        assert code == ResponseCode.SUCCESS and waited >= 2.9 and next_offset == "5", out

        ns = st.servers.namesrv_addr  # type: ignore[union-attr]
        info = admin_json(ns, "getColdDataFlowCtrInfo", "-b", addr)[addr]
        runtime = info["runtimeTable"]
        assert set(runtime) == {"push-cold", "light", "pull-cold"}, info
        assert 3 * BODY < runtime["light"]["coldAcc"] < THRESHOLD
        assert runtime["push-cold"]["coldAcc"] >= THRESHOLD
        assert (info["cgColdReadThreshold"], info["globalColdReadThreshold"]) == (THRESHOLD, 100 << 20)
        assert info["globalAcc"] == sum(e["coldAcc"] for e in runtime.values()), info
        assert info["configTable"] == {}

        # an administrator's threshold for light: its next cold pull is refused
        done = admin_json(ns, "updateColdDataFlowCtrGroupConfig", "-g", "light", "-v", "2000", "-b", addr)
        assert done["brokers"] == [addr]
        assert st.ask(addr, _pull("light", 3, 1)).code == ResponseCode.SYSTEM_BUSY
        table = admin_table(ns, "getColdDataFlowCtrInfo")  # every master by default
        assert "light" in table and "2000" in table and "push-cold" in table
        admin_json(ns, "removeColdDataFlowCtrGroupConfig", "-g", "light")
        assert st.ask(addr, _pull("light", 3, 1)).code == ResponseCode.SUCCESS
        with Admin(ns) as admin:
            assert admin.cold_data_flow_ctr_info()[addr].config_table == {}  # type: ignore[union-attr]
            admin.update_cold_data_flow_ctr_group_config("light", 1 << 40, cluster="DefaultCluster")
            info_c = admin.cold_data_flow_ctr_info(cluster="DefaultCluster")[addr]
            assert info_c is not None and info_c.config_table == {"light": 1 << 40}


def test_bad_requests_get_clear_answers_and_the_control_is_off_by_default(tmp_path: Path) -> None:
    with started(tmp_path / "store", store_options={"total_physical_memory_bytes": SMALL_MEMORY},
                 cg_cold_read_threshold=1) as st:
        addr = _setup(st)
        assert not st.servers.broker.config.cold_data_flow_control_enable  # type: ignore[union-attr]
        for offset in (0, 4, 8):  # off: cold reads are neither counted nor throttled
            assert st.ask(addr, _pull("reader", offset)).code == ResponseCode.SUCCESS
        bad = st.ask(addr, RemotingCommand.request(RequestCode.UPDATE_COLD_DATA_FLOW_CTR_CONFIG, None,
                                                        b"a=12\nb=lots\nc=-1\n"))
        assert bad.code == ResponseCode.SYSTEM_ERROR and "b=lots, c=-1" in bad.remark, bad
        empty = st.ask(addr, RemotingCommand.request(RequestCode.REMOVE_COLD_DATA_FLOW_CTR_CONFIG,
                                                          None))
        assert empty.code == ResponseCode.SYSTEM_ERROR and "no consumer group" in empty.remark
        ns = st.servers.namesrv_addr  # type: ignore[union-attr]
        info = admin_json(ns, "getColdDataFlowCtrInfo", "-c", "DefaultCluster")[addr]
        assert info["runtimeTable"] == {} and info["configTable"] == {} and info["globalAcc"] == 0
        refused = bolide("admin", "updateColdDataFlowCtrGroupConfig", "-g", "g", "-v", "-5", "-n", ns,
                         ok=False)
        assert refused.exit_code != 0 and "-5" in refused.output
        unknown = bolide("admin", "getColdDataFlowCtrInfo", "-c", "NoSuchCluster", "-n", ns, ok=False)
        assert "unknown to the NameServer" in unknown.output
        # turned on at runtime (UPDATE_BROKER_CONFIG), with the hot ratio: every read is cold now
        admin_json(ns, "updateBrokerConfig", "-b", addr, "-k", "coldDataFlowControlEnable", "-v", "true")
        admin_json(ns, "updateBrokerConfig", "-b", addr, "-k", "accessMessageInMemoryHotRatio", "-v", "0")
        assert st.ask(addr, _pull("reader", COUNT - 2, 1)).code == ResponseCode.SUCCESS
        beat = st.ask(addr, _beat({"reader": "CONSUME_PASSIVELY"}))
        assert beat.code == ResponseCode.SUCCESS
        assert st.ask(addr, _pull("reader", COUNT - 1, 1)).code == ResponseCode.SYSTEM_BUSY
