"""`python -m densecode.cli ...` (e.g. under `accelerate launch -m densecode.cli train ...`)."""

import sys

from densecode.cli import main

sys.exit(main())
