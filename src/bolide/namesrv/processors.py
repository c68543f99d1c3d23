"""NameServer request handlers (RocketMQ's DefaultRequestProcessor and ClientRequestProcessor):
a request command in, its response command out, no sockets.

:meth:`NamesrvProcessor.process` answers every code in :attr:`NamesrvProcessor.codes` and
returns None for any other, which the transport answers with REQUEST_CODE_NOT_SUPPORTED.
``channel`` names the connection a request came on (any hashable the transport chooses); a
broker's registrations are dropped when :meth:`RouteInfoManager.on_channel_destroy` is called
with it. The transport sends no response to oneway requests.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

from bolide.common.config_file import parse_properties, update_properties_file
from bolide.errors import BolideError
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from bolide.namesrv.route_info import RouteInfoManager, wall_clock_ms
from bolide.protocol.bodies.admin import TopicList
from bolide.protocol.bodies.broker import DataVersion, RegisterBrokerBody, TopicConfigSerializeWrapper
from bolide.protocol.bodies.route import GetBrokerMemberGroupResponseBody, TopicRouteData
from bolide.protocol.codes import V3_0_11, RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import namesrv as h

Handler = Callable[[RemotingCommand, object | None], RemotingCommand]

# FAQUrl.suggestTodo(FAQUrl.APPLY_TOPIC_URL) as 4.9.8 appends it.
_APPLY_TOPIC_TIP = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def body_crc32(body: bytes) -> int:
    """UtilAll.crc32: CRC32 masked to 31 bits, as brokers put in ``bodyCrc32``."""
    return zlib.crc32(body) & 0x7FFFFFFF


class NamesrvProcessor:
    """The NameServer's request handling over a RouteInfoManager and a KVConfigManager."""

    def __init__(self, config: NamesrvConfig | None = None, routes: RouteInfoManager | None = None,
                 kv: KVConfigManager | None = None, *, clock: Callable[[], int] = wall_clock_ms,
                 config_file: Path | None = None) -> None:
        """``config_file``: where UPDATE_NAMESRV_CONFIG writes its changes (None: nowhere)."""
        self.config = config if config is not None else NamesrvConfig()
        self.config_file = config_file
        self.routes = routes if routes is not None else RouteInfoManager(
            clock=clock, broker_timeout_ms=self.config.broker_channel_expired_time_ms,
            delete_topic_with_broker_registration=self.config.delete_topic_with_broker_registration)
        self.kv = kv if kv is not None else KVConfigManager(self.config.kv_config_path)
        self._clock = clock
        self._started_ms = clock()
        c = RequestCode
        self._handlers: dict[int, Handler] = {
            c.PUT_KV_CONFIG: self.put_kv_config,
            c.GET_KV_CONFIG: self.get_kv_config,
            c.DELETE_KV_CONFIG: self.delete_kv_config,
            c.GET_KVLIST_BY_NAMESPACE: self.get_kvlist_by_namespace,
            c.QUERY_DATA_VERSION: self.query_data_version,
            c.REGISTER_BROKER: self.register_broker,
            c.UNREGISTER_BROKER: self.unregister_broker,
            c.BROKER_HEARTBEAT: self.broker_heartbeat,
            c.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            c.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            c.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            c.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            c.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            c.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            c.REGISTER_TOPIC_IN_NAMESRV: self.register_topic_in_namesrv,
            c.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            c.GET_SYSTEM_TOPIC_LIST_FROM_NS: self._topic_list(self.routes.get_system_topic_list),
            c.GET_UNIT_TOPIC_LIST: self._topic_list(self.routes.get_unit_topics),
            c.GET_HAS_UNIT_SUB_TOPIC_LIST: self._topic_list(self.routes.get_has_unit_sub_topic_list),
            c.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST:
                self._topic_list(self.routes.get_has_unit_sub_un_unit_topic_list),
            c.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
            c.GET_NAMESRV_CONFIG: self.get_namesrv_config,
            c.GET_BROKER_MEMBER_GROUP: self.get_broker_member_group,
        }

    @property
    def codes(self) -> frozenset[int]:
        """The request codes this processor answers."""
        return frozenset(self._handlers)

    def process(self, request: RemotingCommand, channel: object | None = None) -> RemotingCommand | None:
        """The response to ``request``; None for a code not handled here.

        A bad header or body is answered with SYSTEM_ERROR and the problem as the remark, as the
        Java NameServer answers a RemotingCommandException.
        """
        handler = self._handlers.get(request.code)
        if handler is None:
            return None
        try:
            return handler(request, channel)
        except BolideError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))

    # -- KV config ------------------------------------------------------------------------
    def put_kv_config(self, request: RemotingCommand, channel: object | None = None) -> RemotingCommand:
        ext = request.ext_fields
        namespace, key, value = ext.get("namespace"), ext.get("key"), ext.get("value")
        if namespace is None or key is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "namespace or key is null")
        if value is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "value is null")
        self.kv.put(namespace, key, value)
        return request.make_response()

    def get_kv_config(self, request: RemotingCommand, channel: object | None = None) -> RemotingCommand:
        header = request.read_header(h.GetKVConfigRequestHeader)
        value = self.kv.get(header.namespace, header.key)
        if value is None:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {header.namespace} Key: {header.key}")
        return request.make_response(header=h.GetKVConfigResponseHeader(value=value))

    def delete_kv_config(self, request: RemotingCommand, channel: object | None = None) -> RemotingCommand:
        header = request.read_header(h.DeleteKVConfigRequestHeader)
        self.kv.delete(header.namespace, header.key)
        return request.make_response()

    def get_kvlist_by_namespace(self, request: RemotingCommand,
                                channel: object | None = None) -> RemotingCommand:
        header = request.read_header(h.GetKVListByNamespaceRequestHeader)
        body = self.kv.kv_list_body(header.namespace)
        if body is None:
            return request.make_response(ResponseCode.QUERY_NOT_FOUND,
                                         f"No config item, Namespace: {header.namespace}")
        return request.make_response(body=body)

    # -- brokers --------------------------------------------------------------------------
    def register_broker(self, request: RemotingCommand, channel: object | None = None) -> RemotingCommand:
        """REGISTER_BROKER: RegisterBrokerBody (JSON or zlib form) from V3_0_11 on, else a bare
        TopicConfigSerializeWrapper; answers the master's addresses to a slave and the
        ORDER_TOPIC_CONFIG namespace as the body."""
        header = request.read_header(h.RegisterBrokerRequestHeader)
        body = request.body_bytes()
        if header.body_crc32 != 0 and body_crc32(body) != header.body_crc32:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        filter_servers: list[str] | None = None
        if request.version >= V3_0_11:
            parsed = (RegisterBrokerBody.decode_body(body, header.compressed) if body
                      else RegisterBrokerBody())
            wrapper, filter_servers = parsed.topic_config_serialize_wrapper, parsed.filter_server_list
        else:
            wrapper = TopicConfigSerializeWrapper.decode(body) if body else TopicConfigSerializeWrapper()
        result = self.routes.register_broker(
            cluster=header.cluster_name, broker_name=header.broker_name,
            broker_addr=header.broker_addr, broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr, topic_config_wrapper=wrapper,
            filter_servers=filter_servers, channel=channel,
            timeout_ms=header.heartbeat_timeout_millis,
            enable_acting_master=header.enable_acting_master,
            zone_name=request.ext_fields.get("zoneName"))
        answer = h.RegisterBrokerResponseHeader(ha_server_addr=result.ha_server_addr,
                                                master_addr=result.master_addr)
        order_conf = None
        if self.config.return_order_topic_config_to_broker:
            order_conf = self.kv.kv_list_body(NAMESPACE_ORDER_TOPIC_CONFIG)
        return request.make_response(header=answer, body=order_conf or b"")

    def unregister_broker(self, request: RemotingCommand, channel: object | None = None) -> RemotingCommand:
        header = request.read_header(h.UnregisterBrokerRequestHeader)
        self.routes.unregister_broker(cluster=header.cluster_name, broker_name=header.broker_name,
                                      broker_addr=header.broker_addr, broker_id=header.broker_id)
        return request.make_response()

    def query_data_version(self, request: RemotingCommand, channel: object | None = None) -> RemotingCommand:
        """QUERY_DATA_VERSION: ``changed`` tells the broker whether to register again. Every
        query counts as a heartbeat, changed or not, as in RocketMQ 5 (4.x refreshed only an
        unchanged version): a 5.x broker with enableSlaveActingMaster heartbeats this way, and a
        slave's version changes without a registration when it copies its master's topics."""
        header = request.read_header(h.QueryDataVersionRequestHeader)
        version = DataVersion.decode(request.body_bytes())
        changed = self.routes.is_data_version_changed(header.broker_addr, version)
        self.routes.refresh_broker(header.broker_addr)
        stored = self.routes.query_data_version(header.broker_addr)
        return request.make_response(header=h.QueryDataVersionResponseHeader(changed=changed),
                                     body=stored.encode() if stored is not None else b"")

    def broker_heartbeat(self, request: RemotingCommand, channel: object | None = None) -> RemotingCommand:
        """BROKER_HEARTBEAT (5.x, brokers with enableSlaveActingMaster and
        compatibleWithOldNameSrv=false): refresh the liveness of ``brokerAddr``."""
        addr = request.ext_fields.get("brokerAddr")
        if addr:
            self.routes.refresh_broker(addr)
        return request.make_response()

    def wipe_write_perm_of_broker(self, request: RemotingCommand,
                                  channel: object | None = None) -> RemotingCommand:
        header = request.read_header(h.WipeWritePermOfBrokerRequestHeader)
        count = self.routes.wipe_write_perm_of_broker(header.broker_name)
        return request.make_response(header=h.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count))

    def add_write_perm_of_broker(self, request: RemotingCommand,
                                 channel: object | None = None) -> RemotingCommand:
        header = request.read_header(h.AddWritePermOfBrokerRequestHeader)
        count = self.routes.add_write_perm_of_broker(header.broker_name)
        return request.make_response(header=h.AddWritePermOfBrokerResponseHeader(add_topic_count=count))

    # -- routes and topics ----------------------------------------------------------------
    def get_route_info_by_topic(self, request: RemotingCommand,
                                channel: object | None = None) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC: standard JSON for version >= 401 (or acceptStandardJsonOnly),
        fastjson's bare integer keys otherwise; TOPIC_NOT_EXIST (17) without a route."""
        header = request.read_header(h.GetRouteInfoRequestHeader)
        cfg = self.config
        if cfg.need_wait_for_service and \
                self._clock() - self._started_ms < cfg.wait_seconds_for_service * 1000:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "name server not ready")
        route = self.routes.pick_topic_route_data(header.topic, cfg.support_acting_master)
        if route is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}{_APPLY_TOPIC_TIP}")
        if cfg.order_message_enable:
            route.order_topic_conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, header.topic)
        body = route.encode_for(request.version, bool(header.accept_standard_json_only))
        return request.make_response(body=body)

    def get_broker_cluster_info(self, request: RemotingCommand,
                                channel: object | None = None) -> RemotingCommand:
        return request.make_response(body=self.routes.get_all_cluster_info().encode())

    def get_broker_member_group(self, request: RemotingCommand,
                                channel: object | None = None) -> RemotingCommand:
        """GET_BROKER_MEMBER_GROUP (5.x): the brokers of a broker group, from its registrations."""
        header = request.read_header(h.GetBrokerMemberGroupRequestHeader)
        group = self.routes.get_broker_member_group(header.cluster_name, header.broker_name)
        return request.make_response(body=GetBrokerMemberGroupResponseBody(group).encode())

    def get_all_topic_list(self, request: RemotingCommand, channel: object | None = None) -> RemotingCommand:
        if not self.config.enable_all_topic_list:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "disable")
        return request.make_response(body=self.routes.get_all_topic_list().encode())

    def delete_topic_in_namesrv(self, request: RemotingCommand,
                                channel: object | None = None) -> RemotingCommand:
        header = request.read_header(h.DeleteTopicFromNamesrvRequestHeader)
        self.routes.delete_topic(header.topic, header.cluster_name or None)
        return request.make_response()

    def register_topic_in_namesrv(self, request: RemotingCommand,
                                  channel: object | None = None) -> RemotingCommand:
        """REGISTER_TOPIC_IN_NAMESRV (5.x brokers): ext ``topic``, body a TopicRouteData."""
        topic = request.ext_fields.get("topic")
        body = request.body_bytes()
        if topic and body:
            self.routes.register_topic(topic, TopicRouteData.decode(body).queue_datas)
        return request.make_response()

    def get_topics_by_cluster(self, request: RemotingCommand,
                              channel: object | None = None) -> RemotingCommand:
        if not self.config.enable_topic_list:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "disable")
        header = request.read_header(h.GetTopicsByClusterRequestHeader)
        return request.make_response(body=self.routes.get_topics_by_cluster(header.cluster).encode())

    def _topic_list(self, source: Callable[[], TopicList]) -> Handler:
        def handle(request: RemotingCommand, channel: object | None = None) -> RemotingCommand:
            if not self.config.enable_topic_list:
                return request.make_response(ResponseCode.SYSTEM_ERROR, "disable")
            return request.make_response(body=source().encode())
        return handle

    # -- configuration --------------------------------------------------------------------
    def get_namesrv_config(self, request: RemotingCommand, channel: object | None = None) -> RemotingCommand:
        return request.make_response(body=self.config.to_properties_text().encode())

    def update_namesrv_config(self, request: RemotingCommand,
                              channel: object | None = None) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG: properties text in the body; black-listed keys refused (16).
        Changes apply in memory (listener settings take effect at the next start) and, for a
        NameServer started from a config file, are written into it as RocketMQ does."""
        body = request.body_bytes()
        if body:
            props = parse_properties(body.decode("utf-8", "replace"))
            if props.keys() & self.config.black_list:
                return request.make_response(ResponseCode.NO_PERMISSION,
                                             "Can not update config in black list.")
            self.config = self.config.updated(props)
            known = {k: v for k, v in props.items() if k in self.config.to_properties()}
            if self.config_file is not None and known:
                try:
                    update_properties_file(self.config_file, known)
                except OSError as exc:
                    return request.make_response(
                        ResponseCode.SYSTEM_ERROR,
                        f"applied to the running NameServer, but not written to {self.config_file} "
                        f"({exc.strerror or exc}), so a restart undoes it: make the file writable")
        return request.make_response()
