"""``python -m pymc_manidp.cli``: the command line where no ``pymc-manidp`` script is installed."""

import sys

from pymc_manidp.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
