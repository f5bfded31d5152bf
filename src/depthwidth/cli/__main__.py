import sys

from depthwidth.cli import main

sys.exit(main())
