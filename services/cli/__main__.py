"""``python -m modelevents.services.cli``: the ``modelevents`` command."""

import sys

from modelevents.services.cli.main import main

sys.exit(main())
