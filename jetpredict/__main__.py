"""``python -m jetpredict`` runs the command line."""

import sys

from jetpredict.cli import main

sys.exit(main())
