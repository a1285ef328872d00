"""`make demo`: the main job end to end on the local stack (see demo/run.py).

The demo uses the Airflow plugin package (`tidemark_airflow`, for the connector and
lakehouse paths) the way Airflow does: from the plugins folder on `sys.path`.
"""

import sys
from pathlib import Path

_PLUGINS = str(Path(__file__).resolve().parent.parent / "plugins")
if _PLUGINS not in sys.path:
    sys.path.append(_PLUGINS)
