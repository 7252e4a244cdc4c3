"""`python -m sweep.sim [SGLang flags]`: the simulator, without going through the specsweep CLI."""

import sys

from sweep.sim.server import main

sys.exit(main(sys.argv[1:]))
