"""RocketMQ 5's ACL 2.0 on the broker: users and ACLs (:mod:`.metadata`), the model and the
pick of the deciding entry (:mod:`.model`), each request's checks (:mod:`.checks`) and the
``broker.conf`` settings (:mod:`.setup`)."""
