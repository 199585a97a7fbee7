"""The ``modelevents`` command line, and the composition root: the one package that imports every
layer (the consumers' commands included). ``main`` builds the parser from ``COMMAND_MODULES``
(``main.py``); each command is a module of ``commands/`` with ``register(subparsers)``; options
shared by several commands are ``kafka_options`` and ``input_limits``."""

from modelevents.services.cli.main import COMMAND_MODULES, build_parser, main

__all__ = ["COMMAND_MODULES", "build_parser", "main"]
