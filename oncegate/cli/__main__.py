"""``python -m oncegate.cli``: the ``oncegate`` command without its console script."""

import sys

from oncegate.cli import main

sys.exit(main())
