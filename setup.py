"""Builds the optional compiled record scan (bolide.store._fastscan), put path
(bolide.store._append), index build (bolide.store._index) and remoting codec hot paths
(bolide.protocol._codec); all other metadata is in pyproject.toml. ``optional=True``: without
a C compiler the install still succeeds and their pure-Python twins run."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("bolide.store._fastscan", ["src/bolide/store/_fastscan.c"],
                  extra_compile_args=["-O3"], optional=True),
        Extension("bolide.store._append", ["src/bolide/store/_append.c"],
                  extra_compile_args=["-O3"], optional=True),
        Extension("bolide.store._index", ["src/bolide/store/_index.c"],
                  extra_compile_args=["-O3"], optional=True),
        Extension("bolide.protocol._codec", ["src/bolide/protocol/_codec.c"],
                  extra_compile_args=["-O3"], optional=True),
    ],
)
