import sys

from e31_jupyter.cli import main

sys.exit(main())
