"""The ``bolide`` command line."""
