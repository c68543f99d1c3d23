"""``bolide admin`` getTimerMetrics, updateGroupForbidden, queryCorrectionOffset,
resumeCheckHalfMessage and getBrokerMemberGroup against an in-process NameServer and broker."""

from __future__ import annotations

from pathlib import Path

from test_cli_admin import admin_json, admin_table, bolide, started

from bolide.client import Message, MessageQueue
from bolide.client.blocking import Producer
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.headers import UpdateConsumerOffsetRequestHeader

TOPIC = "CliOps"


def test_the_operations_without_an_mqadmin_command(tmp_path: Path) -> None:
    with started(tmp_path / "store") as st:
        assert st.servers is not None
        ns, addr = st.servers.namesrv_addr, st.servers.broker_addr
        admin_json(ns, "updateTopic", "-t", TOPIC, "-r", "2", "-w", "2")

        # timer metrics: one timer message waiting in its delay level
        st.servers.broker.timer_metrics.add(TOPIC, 1)
        metrics = admin_json(ns, "getTimerMetrics", "-b", addr)
        assert metrics["timingCount"][TOPIC]["count"] == 1 and metrics["dataVersion"]["counter"] >= 1
        assert TOPIC in admin_table(ns, "getTimerMetrics", "-b", addr)

        # a group's read ban: ask, forbid, ask, allow
        ban = ("updateGroupForbidden", "-b", addr, "-g", "cli-g", "-t", TOPIC)
        flags: list[tuple[str, ...]] = [(), ("-r", "false"), (), ("-r", "true")]
        asked = [admin_json(ns, *ban, *flag)["readable"] for flag in flags]
        assert asked == [True, False, False, True]
        out = bolide("admin", *ban, "-r", "false", "-n", ns).stdout
        assert f"cli-g may not read {TOPIC} on {addr}" in out
        assert st.servers.broker.subscription_groups.forbidden("cli-g", TOPIC, 2)

        # correction offsets: the smallest offset of the other groups, per queue
        with Producer(ns, "cli-ops-pg") as producer:
            for i in range(4):
                producer.send(Message(TOPIC, b"m%d" % i), queue=MessageQueue(TOPIC, "broker-a", i % 2))
        for group, offsets in (("cli-a", (2, 1)), ("cli-b", (1, 2)), ("cli-cmp", (0, 0))):
            for queue_id, offset in enumerate(offsets):
                r = st.ask(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                         UpdateConsumerOffsetRequestHeader(
                                                             consumer_group=group, topic=TOPIC,
                                                             queue_id=queue_id, commit_offset=offset)))
                assert r.code == ResponseCode.SUCCESS, r
        assert admin_json(ns, "queryCorrectionOffset", "-b", addr, "-t", TOPIC, "-g", "cli-cmp") == {
            "0": 0, "1": 0}
        assert admin_json(ns, "queryCorrectionOffset", "-b", addr, "-t", TOPIC, "-g", "cli-cmp",
                          "-f", "cli-cmp") == {"0": 1, "1": 1}

        # a half message checked again (tests/integration/test_broker_ops.py); an id of no message
        # is refused with the reason
        refused = bolide("admin", "resumeCheckHalfMessage", "-t", TOPIC, "-i", "no-such-id", "-n", ns,
                         ok=False)
        assert refused.exit_code != 0, refused.output
        assert "no message with id 'no-such-id' was found" in refused.output, refused.output

        # the broker group's members, from the NameServer
        members = admin_json(ns, "getBrokerMemberGroup", "-c", "DefaultCluster", "-b", "broker-a")
        assert members["brokerAddrs"] == {"0": addr} and members["brokerName"] == "broker-a"
        nobody = admin_json(ns, "getBrokerMemberGroup", "-c", "DefaultCluster", "-b", "nobody")
        assert nobody["brokerAddrs"] == {}
        assert addr in admin_table(ns, "getBrokerMemberGroup", "-c", "DefaultCluster", "-b", "broker-a")
        correction = admin_table(ns, "queryCorrectionOffset", "-b", addr, "-t", TOPIC, "-g", "cli-cmp")
        assert f"Correction offsets of {TOPIC}" in correction
