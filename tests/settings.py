"""The test suite's settings: config.settings as a developer's machine has them at import — DEBUG on,
so the development key, plain static files and no HTTPS redirect — unless the environment says
otherwise. Django's test runner still serves every request with DEBUG off. Subprocesses a test
starts inherit DJANGO_DEBUG=1 from here unless the test sets their environment itself.
"""

import os
import tempfile

os.environ.setdefault("DJANGO_DEBUG", "1")

from config.settings import *  # noqa: E402, F403
from config.settings import DATABASES  # noqa: E402

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not SQLite's in-memory database: the browser tests' live server answers from several
    # threads, each with its own connection, and an in-memory database is one shared connection
    # ("database table is locked"). One file per test process; pytest-django deletes it at the end.
    # Its writes need not survive a crash: no fsync.
    DATABASES["default"]["TEST"] = {"NAME": os.path.join(tempfile.gettempdir(), f"headroom-test-{os.getpid()}.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"].get("OPTIONS", {}),
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;",
    }

# A forecast run requested in a test executes inline, as a worker would have by the time one looks
# (tests/demo/test_background_run.py runs one in the background on purpose).
FORECAST_RUN_IN_BACKGROUND = False
FORECAST_CHUNK_SIZE = int(os.environ.get("FORECAST_CHUNK_SIZE", "50"))  # the served default's, whatever the broker
# The snapshot's check runs on the request thread that finds it due, where a test can time it
# (tests/admission/test_snapshot_background.py turns the refresher thread on).
ADMISSION_SNAPSHOT_BACKGROUND = False
