"""Client errors: one class per kind of failure, each with a ``retriable`` flag.

A broker or NameServer answer with an error code becomes a :class:`MQBrokerError` subclass
chosen by :func:`error_for_response`; transport failures stay the :class:`~bolide.errors.RemotingError`
subclasses of the remoting layer (all retriable). Every message says what to do.
"""

from __future__ import annotations

from bolide.errors import BolideError
from bolide.protocol.codes import ResponseCode, code_name
from bolide.protocol.command import RemotingCommand


class MQClientError(BolideError):
    """Root of the producer and consumer errors."""


class ClientStateError(MQClientError):
    """The client is closed (or used in a way its state does not allow)."""


class ClientConfigError(MQClientError):
    """A client argument or option is invalid."""


class MessageError(MQClientError):
    """The message cannot be sent as it is (empty body, too large, bad topic)."""


class NoRouteError(MQClientError):
    """No NameServer knows a route for the topic (nor for the auto-create topic TBW102)."""

    retriable = True


class SendTimeoutError(MQClientError):
    """The send did not complete within its timeout (retries included)."""

    retriable = True


class RequestTimeoutError(MQClientError):
    """No reply to a request arrived within its timeout (RocketMQ's RequestTimeoutException)."""

    retriable = True


class MessageNotFoundError(MQClientError):
    """An admin lookup (by id, key or offset) found no message."""


class ConsumersOnlineError(MQClientError):
    """An admin change that needs the consumer group stopped found consumers online (no call
    raises it since offset resets reach online consumers through their brokers; kept for code
    that catches it)."""


class MQBrokerError(MQClientError):
    """A server answered a request with an error code; ``code`` and ``remark`` are its answer."""

    advice = "see the remark for the server's reason"

    def __init__(self, message: str, code: int, remark: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.remark = remark


class BrokerSystemError(MQBrokerError):
    retriable = True
    advice = "the server failed internally; retry, and check the broker log if it persists"


class AclRefusedError(MQBrokerError):
    """The broker's plain ACL refused the request (SYSTEM_ERROR with an ACL remark)."""

    advice = ("the broker checks plain ACL: sign with ClientConfig(access_key=..., secret_key=...) "
              "of an account of its plain_acl.yml that may do this (the remark says what is missing)")


class AuthRefusedError(AclRefusedError):
    """The broker's ACL 2.0 refused the request (NO_PERMISSION with RocketMQ 5's text)."""

    advice = ("the broker checks ACL 2.0: sign with ClientConfig(access_key=<user>, "
              "secret_key=<password>) of an enabled user whose ACL allows this (the remark names "
              "the resource; createAcl grants it)")


_AUTH_REMARKS = ("has no permission to access", "check signature failed.", "username cannot be null.",
                 "is not found.", "is disabled.", "Authorization failed.",
                 "parse authorization context error.")


class SystemBusyError(MQBrokerError):
    retriable = True
    advice = "the broker is overloaded; retry after a short pause or lower the send rate"


class RequestNotSupportedError(MQBrokerError):
    advice = "the server does not implement this request; upgrade the broker or avoid the feature"


class ServiceNotAvailableError(MQBrokerError):
    retriable = True
    advice = "the broker's store is unavailable (e.g. read-only after a disk error); retry on another broker"


class MessageIllegalError(MQBrokerError):
    advice = "shorten the topic, body or properties to what the broker accepts"


class NoPermissionError(MQBrokerError):
    retriable = True
    advice = "the broker or topic does not allow this operation; check the topic's perm and the broker role"


class TopicNotExistError(MQBrokerError):
    retriable = True
    advice = "create the topic (or enable autoCreateTopicEnable on the broker)"


class SubscriptionError(MQBrokerError):
    advice = "check the subscription expression and that the consumer sent its heartbeat"


class SubscriptionGroupNotExistError(MQBrokerError):
    advice = "create the subscription group or enable autoCreateSubscriptionGroup on the broker"


class QueryNotFoundError(MQBrokerError):
    advice = "nothing is stored for this query"


class FlowControlError(MQBrokerError):
    retriable = True
    advice = "the broker throttles requests; retry after a short pause"


class UnitError(MQBrokerError):
    retriable = True
    advice = "the request went to a broker outside the message's unit; retry on another broker"


_BY_CODE: dict[int, type[MQBrokerError]] = {
    ResponseCode.SYSTEM_ERROR: BrokerSystemError,
    ResponseCode.SYSTEM_BUSY: SystemBusyError,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: RequestNotSupportedError,
    ResponseCode.MESSAGE_ILLEGAL: MessageIllegalError,
    ResponseCode.SERVICE_NOT_AVAILABLE: ServiceNotAvailableError,
    ResponseCode.NO_PERMISSION: NoPermissionError,
    ResponseCode.TOPIC_NOT_EXIST: TopicNotExistError,
    ResponseCode.QUERY_NOT_FOUND: QueryNotFoundError,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: SubscriptionError,
    ResponseCode.SUBSCRIPTION_NOT_EXIST: SubscriptionError,
    ResponseCode.SUBSCRIPTION_NOT_LATEST: SubscriptionError,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: SubscriptionGroupNotExistError,
    ResponseCode.NO_BUYER_ID: UnitError,
    ResponseCode.NOT_IN_CURRENT_UNIT: UnitError,
    ResponseCode.FLOW_CONTROL: FlowControlError,
}

# Codes after which a producer tries another queue (Java 4.9 and Go: 17, 14, 1, 16, 204, 205).
SEND_RETRY_CODES = frozenset({  # Java 5.x's list: 4.9's plus SYSTEM_BUSY and GO_AWAY
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT,
    ResponseCode.SYSTEM_BUSY, ResponseCode.GO_AWAY,
})


def error_class(code: int) -> type[MQBrokerError]:
    """The exception class for a response code (MQBrokerError for codes without one)."""
    return _BY_CODE.get(code, MQBrokerError)


def error_for_response(response: RemotingCommand, what: str, addr: str = "") -> MQBrokerError:
    """The exception for an error ``response`` to the request described by ``what``."""
    cls = error_class(response.code)
    remark = response.remark or ""
    if cls is BrokerSystemError and (remark.startswith("AclError:") or "AclException" in remark):
        cls = AclRefusedError  # Bolide's and RocketMQ's refusals; retrying cannot help
    elif cls is NoPermissionError and any(text in remark for text in _AUTH_REMARKS):
        cls = AuthRefusedError  # ACL 2.0's refusals (Bolide's and RocketMQ 5's)
    where = f" from {addr}" if addr else ""
    message = (f"{what} failed: {code_name(response.code, True)}{where}"
               f"{': ' + remark if remark else ''}; {cls.advice}")
    return cls(message, response.code, remark)
