"""The client's public API is documented and the blocking API mirrors the asyncio one: every
public class, method and property of ``bolide.client`` and ``bolide.client.blocking`` has a
docstring, and each blocking method exists on its asyncio twin (or is a documented extra)."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest

import bolide.client as asyncio_api
from bolide.client import blocking

TWINS = ["Admin", "Producer", "PullConsumer", "PushConsumer", "SimpleConsumer", "TransactionProducer"]
# what only the blocking classes have: their thread, and futures of batch sends
BLOCKING_EXTRAS = {"loop_thread", "send_batch_async", "pull_records_later"}


def public_members(cls: type) -> dict[str, object]:
    """Public attributes defined by ``cls`` and its Bolide base classes (not object's)."""
    members: dict[str, object] = {}
    for klass in cls.__mro__:
        if not klass.__module__.startswith("bolide"):
            continue
        for name, value in vars(klass).items():
            if not name.startswith("_") and name not in members:
                members[name] = value
    return members


def undocumented(module: ModuleType) -> list[str]:
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)) or not obj.__module__.startswith("bolide"):
            continue
        if not obj.__doc__:
            missing.append(name)
        if not inspect.isclass(obj):
            continue
        for member, value in public_members(obj).items():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if (inspect.isfunction(value) or isinstance(value, property)) and not value.__doc__:
                missing.append(f"{name}.{member}")
    return missing


@pytest.mark.parametrize("module", [asyncio_api, blocking], ids=lambda m: m.__name__)
def test_every_public_name_has_a_docstring(module: ModuleType) -> None:
    assert undocumented(module) == []


@pytest.mark.parametrize("name", TWINS)
def test_blocking_classes_mirror_their_asyncio_twins(name: str) -> None:
    asyncio_members = public_members(getattr(asyncio_api, name))
    blocking_members = set(public_members(getattr(blocking, name)))
    assert blocking_members - BLOCKING_EXTRAS <= set(asyncio_members) | {"rebalances", "checks_answered"}
    # the blocking API offers every coroutine method meant for applications
    internal = {"initial_offset", "start_instance", "target_assignment", "allocated", "rebalance",
                "send_half", "execute_local", "end_transaction", "transaction_result"}
    coroutines = {m for m, v in asyncio_members.items() if inspect.iscoroutinefunction(v)} - internal
    assert coroutines <= blocking_members


def test_blocking_docstrings_are_the_asyncio_ones() -> None:
    for name, method in [("Producer", "send"), ("PullConsumer", "poll"), ("Admin", "topic_route"),
                         ("PushConsumer", "start")]:
        twin = inspect.getdoc(getattr(getattr(asyncio_api, name), method))
        assert twin and inspect.getdoc(getattr(getattr(blocking, name), method)) == twin
