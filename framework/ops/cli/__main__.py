"""``python -m framework.ops.cli``: the same as the ``splitstate`` command."""

import sys

from framework.ops.cli import main

sys.exit(main())
