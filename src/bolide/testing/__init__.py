"""Helpers for tests that need real processes and real files: a store writer to SIGKILL
(:mod:`bolide.testing.crash_writer`), its driver and checks (:mod:`bolide.testing.crash`), and
ways to damage store files on purpose. Nothing in ``src`` imports this package.
"""
