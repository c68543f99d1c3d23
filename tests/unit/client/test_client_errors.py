"""Response codes -> exception classes: the class, its ``retriable`` flag and a message that
names the request, the code, the broker and what to do."""

from __future__ import annotations

import pytest

from bolide.client.errors import (
    SEND_RETRY_CODES,
    BrokerSystemError,
    FlowControlError,
    MessageIllegalError,
    MQBrokerError,
    NoPermissionError,
    QueryNotFoundError,
    RequestNotSupportedError,
    ServiceNotAvailableError,
    SubscriptionError,
    SubscriptionGroupNotExistError,
    SystemBusyError,
    TopicNotExistError,
    UnitError,
    error_class,
    error_for_response,
)
from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import RemotingCommand

CASES = [
    (ResponseCode.SYSTEM_ERROR, BrokerSystemError, True),
    (ResponseCode.SYSTEM_BUSY, SystemBusyError, True),
    (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, RequestNotSupportedError, False),
    (ResponseCode.MESSAGE_ILLEGAL, MessageIllegalError, False),
    (ResponseCode.SERVICE_NOT_AVAILABLE, ServiceNotAvailableError, True),
    (ResponseCode.NO_PERMISSION, NoPermissionError, True),
    (ResponseCode.TOPIC_NOT_EXIST, TopicNotExistError, True),
    (ResponseCode.QUERY_NOT_FOUND, QueryNotFoundError, False),
    (ResponseCode.SUBSCRIPTION_PARSE_FAILED, SubscriptionError, False),
    (ResponseCode.SUBSCRIPTION_NOT_EXIST, SubscriptionError, False),
    (ResponseCode.SUBSCRIPTION_NOT_LATEST, SubscriptionError, False),
    (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, SubscriptionGroupNotExistError, False),
    (ResponseCode.NO_BUYER_ID, UnitError, True),
    (ResponseCode.NOT_IN_CURRENT_UNIT, UnitError, True),
    (ResponseCode.FLOW_CONTROL, FlowControlError, True),
]


@pytest.mark.parametrize(("code", "cls", "retriable"), CASES)
def test_each_code_has_its_class(code: int, cls: type[MQBrokerError], retriable: bool) -> None:
    assert error_class(code) is cls
    error = error_for_response(RemotingCommand(code=code, remark="the broker's reason"),
                               "SEND_MESSAGE_V2 to topic T", "10.0.0.1:10911")
    assert type(error) is cls and error.retriable is retriable
    assert (error.code, error.remark) == (code, "the broker's reason")
    text = str(error)
    assert text.startswith("SEND_MESSAGE_V2 to topic T failed: ")
    assert f"{ResponseCode(code).name}({code})" in text
    assert "from 10.0.0.1:10911" in text and "the broker's reason" in text
    assert text.endswith(cls.advice)


def test_an_unknown_code_is_a_plain_broker_error() -> None:
    error = error_for_response(RemotingCommand(code=9999), "PULL_MESSAGE")
    assert type(error) is MQBrokerError and not error.retriable
    assert str(error) == f"PULL_MESSAGE failed: 9999; {MQBrokerError.advice}"


def test_a_producer_retries_on_the_codes_java_retries_on() -> None:
    assert {ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE,
            ResponseCode.SYSTEM_ERROR, ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID,
            ResponseCode.NOT_IN_CURRENT_UNIT, ResponseCode.SYSTEM_BUSY} <= SEND_RETRY_CODES
    assert ResponseCode.MESSAGE_ILLEGAL not in SEND_RETRY_CODES
