"""``python -m minitrans`` is the ``minitrans`` command."""

import sys

from minitrans.cli import main

sys.exit(main())
