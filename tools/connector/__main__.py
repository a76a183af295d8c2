"""``python -m tools.connector [--check]``: write, or check, the connector's definitions."""

import sys

from tools.connector.build import main

sys.exit(main())
