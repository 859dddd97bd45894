# Two commands: `make run` and `make test`. Each makes .venv and installs on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint check serve demo bench clean

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py load_demo
	$(BIN)/python manage.py load_demo_alerts
	$(BIN)/python manage.py seed_history
	$(BIN)/python manage.py reconcile
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	@echo ""
	@echo "  Headroom is at http://$(HOST):$(PORT)/   (password for every demo login: demo)"
	@echo "  logins: demo-operator, demo-approver, demo-requester, demo-viewer (acme), demo-outsider (globex)"
	@echo "  API docs: http://$(HOST):$(PORT)/api/docs/"
	@echo ""
	$(BIN)/python bin/run_all.py --host $(HOST) --port $(PORT)

# `make test` = lint, then pytest. PYTEST_ARGS passes options through
# (e.g. PYTEST_ARGS='-m "not postgres and not redis"'); SKIP_LINT=1 runs pytest alone
# (.ci/run's second pass, after the first pass has linted the same tree).
PYTEST_ARGS ?=
SKIP_LINT ?=
# `check --deploy` runs on production-shaped settings: DEBUG off, a throwaway strong key made
# fresh for each run (never a real secret), a real host name.
DEPLOY_SECRET_KEY = $(shell $(PY) -c 'import secrets; print(secrets.token_urlsafe(64))')
DEPLOY_ENV = DJANGO_DEBUG=0 DJANGO_SECRET_KEY='$(DEPLOY_SECRET_KEY)' DJANGO_ALLOWED_HOSTS=headroom.example

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy capacity
	$(BIN)/lint-imports
	$(BIN)/python manage.py makemigrations --check --dry-run
	@echo "manage.py check --deploy --fail-level WARNING  (DJANGO_DEBUG=0, generated key, host headroom.example)"
	@$(DEPLOY_ENV) $(BIN)/python manage.py check --deploy --fail-level WARNING

test: $(STAMP) $(if $(filter 1 true yes,$(SKIP_LINT)),,lint)
	$(BIN)/python -m pytest -p no:cacheprovider $(PYTEST_ARGS)

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) db.sqlite3* staticfiles artifacts
