"""A running controller's Prometheus endpoint (``metricsExporterType=PROM``), scraped over HTTP:
a lone controller after brokers register, elect, refuse a bad request and lose their master
(which the controller replaces), and the peers of a Raft group (the leader's appends and
elections, every peer's role and the brokers' heartbeats)."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bolide.controller import ControllerConfig, ControllerServer
from bolide.protocol.codes import RequestCode as C
from bolide.protocol.codes import ResponseCode as RC
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import controller as h
from bolide.remoting import RemotingClient, run
from bolide.testing.controller import ControllerBroker, ControllerGroup
from conftest import wait_until

Found = dict[str, list[tuple[dict[str, str], float]]]
PROM = {"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0"}


async def scrape(server: ControllerServer) -> Found:
    assert server.metrics_endpoint is not None
    url = f"http://127.0.0.1:{server.metrics_endpoint.port}/metrics"

    def get() -> str:
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return str(answer.read().decode())
    found: Found = {}
    for family in text_string_to_metric_families(await asyncio.to_thread(get)):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def total(found: Found, name: str, **labels: str) -> float:
    return sum(v for got, v in found.get(name, []) if labels.items() <= got.items())


def test_a_lone_controller_shows_requests_elections_and_brokers(tmp_path: Path) -> None:
    async def main() -> None:
        config = ControllerConfig.from_mapping({
            **PROM, "controllerStorePath": str(tmp_path / "ctrl"), "controllerDLegerGroup": "G",
            "metricsLabel": "env:test", "scanNotActiveBrokerInterval": "100",
            "scanInactiveMasterInterval": "100", "enableElectUncleanMaster": "true"})
        async with ControllerServer(config, host="127.0.0.1", port=0) as server:
            one, two = ControllerBroker(server.address, "b", "C"), ControllerBroker(server.address, "b", "C")
            try:
                for broker in (one, two):
                    await broker.join()
                    await broker.beat(timeout_ms=30_000)
                assert (await one.elect()).code == RC.SUCCESS
                assert (await two.elect()).code == RC.CONTROLLER_MASTER_STILL_EXIST
                bad = await one.call(C.CONTROLLER_GET_SYNC_STATE_DATA)  # no body: refused
                assert bad.code == RC.CONTROLLER_INVALID_REQUEST
                found = await scrape(server)
                common = {"address": server.address, "group": "G", "peer_id": "n0", "env": "test"}
                assert found["role"] == [(common, 1)]  # a lone controller leads
                assert total(found, "active_broker_num", cluster="C", broker_set="b") == 2
                assert found["dledger_disk_usage_bytes"][0][1] > 0
                assert total(found, "request_total", request_type="CONTROLLER_REGISTER_BROKER",
                             request_handle_status="success") == 2
                assert total(found, "request_total", request_type="CONTROLLER_GET_SYNC_STATE_DATA",
                             request_handle_status="failed") == 1
                assert total(found, "request_latency_microseconds_count",
                             request_type="CONTROLLER_BROKER_HEARTBEAT") == 4
                assert total(found, "election_total", cluster="C", broker_set="b",
                             election_result="new_master_elected") == 1
                assert total(found, "election_total", election_result="keep_current_master") == 1
                appends = total(found, "dledger_op_total", dledger_operation="append",
                                dLedger_operation_status="success")
                assert appends >= 3  # two applied ids and the election, at least
                assert total(found, "dledger_op_latency_microseconds_count") == appends

                await one.close()  # the master's connection drops: the controller elects two

                async def replaced() -> bool:
                    got = await scrape(server)
                    return (total(got, "election_total", cluster="", broker_set="b",
                                  election_result="new_master_elected") == 1
                            and total(got, "active_broker_num", broker_set="b") == 1)
                async with asyncio.timeout(15):
                    while not await replaced():
                        await asyncio.sleep(0.05)
            finally:
                await one.close()
                await two.close()
        assert server.metrics_endpoint is not None
        port = server.metrics_endpoint.port
        try:  # closed with the controller
            await asyncio.open_connection("127.0.0.1", port)
            raise AssertionError(f"the metrics port {port} still answers after close")
        except OSError:
            pass
    run(main())


def test_the_peers_of_a_group_show_their_roles_and_the_leaders_appends(tmp_path: Path) -> None:
    async def main() -> None:
        group = ControllerGroup(tmp_path / "ctrl", controllerDLegerGroup="G", **PROM)
        try:
            await group.start()
            leader = await group.leader()
            followers = [s for s in group.running if s is not leader]
            broker = ControllerBroker(leader.address, "b", "C", beat_to=group.addresses)
            try:
                await broker.join()
                await broker.beat(timeout_ms=30_000)
                assert (await broker.elect()).code == RC.SUCCESS
                async with RemotingClient() as client:
                    refused = await client.invoke(followers[0].address, RemotingCommand.request(
                        C.CONTROLLER_GET_REPLICA_INFO, h.GetReplicaInfoRequestHeader(broker_name="b")))
                assert refused.code == RC.CONTROLLER_NOT_LEADER
                await wait_until(lambda: all(s.heartbeats.active_counts() for s in group.running))
                scraped = {s.config.self_id: await scrape(s) for s in group.running}
            finally:
                await broker.close()
            for server in group.running:
                found = scraped[server.config.self_id]
                own = {"address": server.config.self_peer("").address, "group": "G",
                       "peer_id": server.config.self_id}
                assert found["role"] == [(own, 1 if server is leader else 0)]
                assert total(found, "active_broker_num", cluster="C", broker_set="b") == 1
                assert found["dledger_disk_usage_bytes"][0][1] > 0
            ours = scraped[leader.config.self_id]
            assert total(ours, "election_total", cluster="C", election_result="new_master_elected") == 1
            appends = total(ours, "dledger_op_total", dLedger_operation_status="success")
            assert appends >= 2  # the applied id and the election, at least
            assert total(ours, "dledger_op_latency_microseconds_count") == appends
            theirs = scraped[followers[0].config.self_id]
            assert "dledger_op_total" not in theirs and "election_total" not in theirs
            # a follower answers CONTROLLER_NOT_LEADER: handled, as RocketMQ counts it
            assert total(theirs, "request_total", request_type="CONTROLLER_GET_REPLICA_INFO",
                         request_handle_status="success") == 1
        finally:
            await group.stop()
    run(main())
