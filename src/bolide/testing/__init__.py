"""Helpers for tests that work on real files and processes: a store writer to SIGKILL
(:mod:`bolide.testing.crash_writer`) with its driver, checks and ways to damage store files
(:mod:`bolide.testing.crash`), and unclean shutdowns of an in-process store
(:mod:`bolide.testing.simulate`). Nothing else in ``src`` imports this package.
"""
