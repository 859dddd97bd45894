"""The test suite's settings: config.settings as a developer's machine has them at import — DEBUG on,
so the development key, plain static files and no HTTPS redirect — unless the environment says
otherwise. Django's test runner still serves every request with DEBUG off. Subprocesses a test
starts inherit DJANGO_DEBUG=1 from here unless the test sets their environment itself.
"""

import os

os.environ.setdefault("DJANGO_DEBUG", "1")

from config.settings import *  # noqa: E402, F403
