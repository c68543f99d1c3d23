"""Raft for a group of several controllers: :mod:`.core` (the algorithm, pure), :mod:`.messages`
(what peers exchange, and its JSON form), :mod:`.storage` (term, vote, log and snapshot files)
and :mod:`.journal` (the controller's journal over them)."""
