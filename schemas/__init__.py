"""The ModelEvent contract: records, Avro schemas, codec.

``modelevents.schemas.__version__`` is the installed distribution's version (there is no
top-level ``modelevents`` package: the four parts install as ``modelevents.*`` namespaces, and
this one is what every producer and consumer imports). It is read from the package metadata on
first access, so importing the contract costs nothing for it.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("modelevents")
        except PackageNotFoundError:  # run from a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
