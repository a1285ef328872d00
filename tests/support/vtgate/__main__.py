import sys

from tests.support.vtgate.server import main

sys.exit(main())
