"""``python -m gnntrain.tune``: :mod:`gnntrain.tune.cli`."""

import sys

from gnntrain.tune.cli import main

sys.exit(main())
