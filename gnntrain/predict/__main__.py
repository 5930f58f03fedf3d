"""``python -m gnntrain.predict``: see :mod:`gnntrain.predict`."""

import sys

from gnntrain.predict.cli import main

sys.exit(main())
