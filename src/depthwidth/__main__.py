"""`python -m depthwidth ...` runs the command line, as the `depthwidth` script does."""

import sys

from depthwidth.cli import main

sys.exit(main())
