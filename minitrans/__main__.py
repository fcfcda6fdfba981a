"""``python -m minitrans`` is the ``minitrans`` command."""

import sys

from minitrans.cli.main import main

sys.exit(main())
