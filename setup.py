"""Builds the optional compiled record scan (bolide.store._fastscan) put path
(bolide.store._append) and index build (bolide.store._index); all other metadata is in
pyproject.toml. ``optional=True``: without a C compiler the install still succeeds and
bolide.store.fastscan uses its pure-Python scan."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("bolide.store._fastscan", ["src/bolide/store/_fastscan.c"],
                  extra_compile_args=["-O3"], optional=True),
        Extension("bolide.store._append", ["src/bolide/store/_append.c"],
                  extra_compile_args=["-O3"], optional=True),
        Extension("bolide.store._index", ["src/bolide/store/_index.c"],
                  extra_compile_args=["-O3"], optional=True),
    ],
)
