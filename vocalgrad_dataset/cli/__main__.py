"""`python -m vocalgrad_dataset.cli`: the vocalgrad-dataset command."""

import sys

from vocalgrad_dataset.cli import main

sys.exit(main())
