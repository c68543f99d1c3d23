"""Headers of RocketMQ 5's ACL 2.0 administration: users (AUTH_CREATE_USER 3001 to
AUTH_LIST_USER 3005) and ACLs (AUTH_CREATE_ACL 3006 to AUTH_LIST_ACL 3010)."""

from __future__ import annotations

from bolide.protocol.headers.base import Header, header


@header
class UserRequestHeader(Header):
    """AUTH_CREATE_USER, AUTH_UPDATE_USER, AUTH_DELETE_USER, AUTH_GET_USER."""

    username: str | None = None


@header
class ListUsersRequestHeader(Header):
    filter: str | None = None  # a part of the user names to list


@header
class AclRequestHeader(Header):
    """AUTH_CREATE_ACL, AUTH_UPDATE_ACL, AUTH_GET_ACL (``subject`` ``User:<name>``), and
    AUTH_DELETE_ACL (all of the subject's ACL, or one ``resource`` of a ``policyType``)."""

    subject: str | None = None
    policy_type: str | None = None
    resource: str | None = None


@header
class ListAclsRequestHeader(Header):
    subject_filter: str | None = None
    resource_filter: str | None = None
