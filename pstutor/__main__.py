"""`python -m pstutor` is the `pstutor` command."""

import sys

from pstutor.cli import main

sys.exit(main())
