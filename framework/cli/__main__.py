"""``python -m framework.cli``: the same as the ``splitstate`` command."""

import sys

from framework.cli import main

sys.exit(main())
