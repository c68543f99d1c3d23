"""Plain ACL on the broker (``aclEnable=true``): RocketMQ's accounts files, per-request checks
and their reloading."""

from bolide.broker.acl.accounts import Account, AclState, PlainAcl
from bolide.broker.acl.addresses import AddressPattern, compile_pattern
from bolide.broker.acl.validator import AclValidator, check_request, needed_resources
from bolide.broker.acl.watcher import AclFileWatcher

__all__ = ["Account", "AclFileWatcher", "AclState", "AclValidator", "AddressPattern", "PlainAcl",
           "check_request", "compile_pattern", "needed_resources"]
