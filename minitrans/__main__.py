"""``python -m minitrans`` is the ``minitrans`` command."""

import sys

from minitrans.tools.cli import main

sys.exit(main())
