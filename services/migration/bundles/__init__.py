"""Bundles: the YAML a user writes (``bundle_file``), resolved against the installed adapters
and the capability manifest into a ``schemas.bundles.Bundle``; the ``bundles`` topic that holds
them (``store``); the one way a command names a bundle, by id on the topic or by file
(``reference``); field-level differences between two of them (``diff``). ``example.yaml``
beside this module is the bundle file users start from (``modelevents bundle example``).
"""
