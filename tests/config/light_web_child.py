"""Run by test_light_web.py in a fresh interpreter: import the WSGI app as gunicorn does, render the
home and planning pages (a finished forecast run on them), print which heavy modules got loaded."""

import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import config.wsgi  # noqa: E402, F401, I001 - what a web worker imports first, before anything else

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

call_command("migrate", verbosity=0)

from tests import factories as f  # noqa: E402
from tests.forecasting.factories import ForecastRunFactory, ForecastSeriesFactory, PoolDemandFactory  # noqa: E402

fleet = f.build_fleet()
# The planning page prices pools on-demand; the test accelerator gets a rate so the page has one.
fleet.pool_a.operating_point.accelerator.__class__.objects.update(cloud_on_demand_per_hour=2.5)
run = ForecastRunFactory(series_count=1)
ForecastSeriesFactory(run=run, tenant=fleet.acme)
PoolDemandFactory(run=run, pool=fleet.pool_a)
client = Client()
client.force_login(fleet.operator)
statuses = {url: client.get(url).status_code for url in ("/", "/planning/")}
heavy = sorted(m for m in ("statsforecast", "pandas", "scipy", "pyarrow", "statsmodels") if m in sys.modules)
print(json.dumps({"statuses": statuses, "heavy": heavy}))
