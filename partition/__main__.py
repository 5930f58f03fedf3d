"""``python -m partition --config datasets/<name>.yaml --parts 4`` (see :mod:`partition.cli`)."""

import sys

from partition.cli import main

sys.exit(main())
