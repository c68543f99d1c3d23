"""Broker request processors, one module per area; each registers its codes on a server."""
