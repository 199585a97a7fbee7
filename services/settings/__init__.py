"""The configuration of every command, in layers: defaults < config file < environment < options.

``sources`` reads the layers (the file, the environment with its ``*_FILE`` secrets, the
options), ``problems`` turns what fails validation into one line per problem, and ``tree`` is the
settings tree every service reads (``load_settings``). Nothing here is imported by this
``__init__``: the Kafka settings use ``sources`` without pulling in the gateway's models.
"""
