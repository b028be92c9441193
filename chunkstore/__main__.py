"""``python -m chunkstore`` runs the command-line interface."""

import sys

from chunkstore.cli import main

sys.exit(main())
