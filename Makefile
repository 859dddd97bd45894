# Two commands: `make run` and `make test`. Each makes .venv and installs on first use:
# `make run` (and `make prod`) what runs (requirements.txt), `make test` that plus the tests and
# linters (requirements-dev.txt).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run prod test test-slow test-all test-fast lint check serve demo bench clean gateways front

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	touch $(STAMP)

$(DEV_STAMP): requirements-dev.txt $(STAMP)
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $(DEV_STAMP)

# The gateway integrations (issue 37): the LiteLLM proxy in a venv of its own (its pins conflict with
# the app's; requirements-gateways.txt says which), for tests/integrations and bench/gateway_litellm.py.
GW_VENV := $(VENV)/gateways
GW_STAMP := $(GW_VENV)/.installed
$(GW_STAMP): requirements-gateways.txt | $(STAMP)
	test -x $(GW_VENV)/bin/python || $(PY) -m venv $(GW_VENV)
	$(GW_VENV)/bin/pip install --quiet --require-hashes -r requirements-gateways.txt
	touch $(GW_STAMP)

gateways: $(GW_STAMP)

# The compiled ext_proc front for Envoy (integrations/envoy/front/, docs/gateways.md): built outside the
# tree, where the tests and bench/gateway_envoy.py look for it. Needs g++ make pkg-config libgrpc++-dev libprotobuf-dev.
front:
	$(MAKE) -C integrations/envoy/front OUT="$${TMPDIR:-/tmp}/headroom-front"

# A production image installs this alone: no test runner, linters or browser driver.
prod: $(STAMP)

# `make run` serves the demo as production does (gunicorn + whitenoise, DEBUG off; bin/run_all.py
# starts the processes beside it), over plain HTTP on this machine. Its key is local: made once per
# checkout in .venv, never a production secret. DJANGO_DEBUG=1 make run shows tracebacks.
RUN_SECRET := $(VENV)/.run-secret-key
RUN_ENV = HEADROOM_LOCAL_HTTP=1 DJANGO_SECRET_KEY="$$(cat $(RUN_SECRET))"

$(RUN_SECRET): | $(STAMP)
	@$(BIN)/python -c 'import secrets; print("local-make-run-" + secrets.token_urlsafe(64))' > $@

run: $(STAMP) $(RUN_SECRET)
	$(RUN_ENV) $(BIN)/python manage.py migrate --noinput
	$(RUN_ENV) $(BIN)/python manage.py load_demo
	$(RUN_ENV) $(BIN)/python manage.py load_demo_alerts
	$(RUN_ENV) $(BIN)/python manage.py seed_history
	$(RUN_ENV) $(BIN)/python manage.py seed_launches
	@# The first visit shows the whole product: a forecast, reconciliation and alerts before serving (docs/demo.md).
	$(RUN_ENV) $(BIN)/python manage.py first_forecast
	$(RUN_ENV) $(BIN)/python manage.py reconcile
	$(RUN_ENV) $(BIN)/python manage.py evaluate_alerts
	$(RUN_ENV) $(BIN)/python manage.py collectstatic --noinput --verbosity 0
	@echo ""
	@echo "  Headroom is at http://$(HOST):$(PORT)/   (password for every demo login: demo)"
	@echo "  logins: demo-operator, demo-approver, demo-requester, demo-viewer (acme), demo-outsider (globex)"
	@echo "  API docs: http://$(HOST):$(PORT)/api/docs/"
	@$(RUN_ENV) $(BIN)/python bin/run_all.py --host $(HOST) --port $(PORT) --print | sed 's/^/  /'
	@echo ""
	$(RUN_ENV) $(BIN)/python bin/run_all.py --host $(HOST) --port $(PORT)

# `make test` = lint, then pytest. PYTEST_ARGS passes options through
# (e.g. PYTEST_ARGS='-m "not postgres and not redis"'); SKIP_LINT=1 runs pytest alone
# (.ci/run's second pass, after the first pass has linted the same tree).
PYTEST_ARGS ?=
SKIP_LINT ?=
# `check --deploy` runs on production-shaped settings: DEBUG off, a throwaway strong key made
# fresh for each run (never a real secret), a real host name.
DEPLOY_SECRET_KEY = $(shell $(PY) -c 'import secrets; print(secrets.token_urlsafe(64))')
DEPLOY_ENV = DJANGO_DEBUG=0 DJANGO_SECRET_KEY='$(DEPLOY_SECRET_KEY)' DJANGO_ALLOWED_HOSTS=headroom.example

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python manage.py makemigrations --check --dry-run
	@echo "manage.py check --deploy --fail-level WARNING  (DJANGO_DEBUG=0, generated key, host headroom.example)"
	@$(DEPLOY_ENV) $(BIN)/python manage.py check --deploy --fail-level WARNING

# The suite runs on every core (pytest-xdist, one SQLite file / PostgreSQL test database per worker,
# a test file stays on one worker so its module fixtures are built once); XDIST=0 runs it in one
# process. Two halves (issue 28), each timed:
#   `make test`       the suite a developer runs: everything but the browser and slow (real-process) tests;
#   `make test-slow`  those: Chromium page walks, the LiteLLM proxy, Envoy, Prometheus, Alertmanager,
#                     gunicorn and Celery processes, 100k-event replays, the schema fuzzer;
#   `make test-all`   both in one run (CI's real-services pass).
# CI runs all of it (.ci/run). MARK narrows any of them further (MARK='not postgres and not redis');
# `make test-fast` is the quick loop: no browser, no real services, no fuzzing, no slow tests, no lint.
XDIST ?= auto
XDIST_ARGS = $(if $(filter 0,$(XDIST)),,-n $(XDIST) --dist loadfile)
MARK ?=
SLOW_MARK := slow or browser
marks = -m "$(if $(MARK),($(1)) and ($(MARK)),$(1))"
PYTEST = start=$$(date +%s); $(BIN)/python -m pytest -p no:cacheprovider --durations=15 $(XDIST_ARGS)
TIMED = rc=$$?; echo "make $@: pytest took $$(( $$(date +%s) - start ))s (exit $$rc)"; exit $$rc
LINT_FIRST = $(if $(filter 1 true yes,$(SKIP_LINT)),,lint)

test: $(DEV_STAMP) $(LINT_FIRST)
	@$(PYTEST) $(call marks,not ($(SLOW_MARK))) $(PYTEST_ARGS); $(TIMED)

test-slow: $(DEV_STAMP) $(GW_STAMP) $(LINT_FIRST)
	@$(PYTEST) $(call marks,$(SLOW_MARK)) $(PYTEST_ARGS); $(TIMED)

test-all: $(DEV_STAMP) $(GW_STAMP) $(LINT_FIRST)
	@$(PYTEST) $(if $(MARK),-m "$(MARK)",) $(PYTEST_ARGS); $(TIMED)

test-fast: $(DEV_STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider $(XDIST_ARGS) -m "not postgres and not redis and not browser and not fuzz and not slow" $(PYTEST_ARGS)

bench: $(DEV_STAMP) $(GW_STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) db.sqlite3* staticfiles artifacts
