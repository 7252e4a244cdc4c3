"""`python -m sweep.sim [SGLang flags]`: the simulator, without going through the specsweep CLI."""

import sys

from sweep.sim.front import main

sys.exit(main(sys.argv[1:]))
