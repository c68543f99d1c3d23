"""ACL 2.0's settings in ``broker.conf``: the users the broker creates at start
(``initAuthenticationUser``, ``innerClientAuthenticationCredentials``) and the signing of the
broker's own requests with the inner credentials."""

from __future__ import annotations

import json

from bolide.broker.auth.model import SUPER
from bolide.broker.config import BrokerConfig
from bolide.errors import ConfigError
from bolide.protocol.bodies.auth import UserInfo
from bolide.remoting.hooks import AclClientRPCHook


def _json_pair(text: str, key: str, name_field: str, secret_field: str) -> tuple[str, str] | None:
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
        name, secret = obj[name_field], obj[secret_field]
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"{key} must be JSON like {{\"{name_field}\":\"...\",\"{secret_field}\":"
                          f"\"...\"}}, got {text!r}") from None
    if not isinstance(name, str) or not isinstance(secret, str) or not name or not secret:
        raise ConfigError(f"{key}: {name_field} and {secret_field} must be non-empty strings")
    return name, secret


def initial_users(config: BrokerConfig) -> list[UserInfo]:
    """The super users ``broker.conf`` asks for; ConfigError naming the key when unreadable."""
    users = []
    for text, key, fields in (
            (config.init_authentication_user, "initAuthenticationUser", ("username", "password")),
            (config.inner_client_authentication_credentials, "innerClientAuthenticationCredentials",
             ("accessKey", "secretKey"))):
        pair = _json_pair(text, key, *fields)
        if pair is not None:
            users.append(UserInfo(username=pair[0], password=pair[1], user_type=SUPER))
    return users


def inner_hooks(config: BrokerConfig) -> list[AclClientRPCHook]:
    """The hook signing the broker's own requests (to NameServers, a slave's to its master)."""
    pair = _json_pair(config.inner_client_authentication_credentials,
                      "innerClientAuthenticationCredentials", "accessKey", "secretKey")
    return [] if pair is None else [AclClientRPCHook(*pair)]
