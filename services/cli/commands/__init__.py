"""Subcommands of the `modelevents` CLI, one module each with ``register(subparsers)``."""
