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
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	@echo ""
	@echo "  Headroom is at http://$(HOST):$(PORT)/   (password for every demo login: demo)"
	@echo "  logins: demo-operator, demo-approver, demo-requester, demo-viewer (acme), demo-outsider (globex)"
	@echo "  API docs: http://$(HOST):$(PORT)/api/docs/"
	@echo ""
	$(BIN)/python bin/run_all.py --host $(HOST) --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy capacity
	$(BIN)/lint-imports
	$(BIN)/python manage.py makemigrations --check --dry-run

test: $(STAMP) lint
	$(BIN)/python -m pytest -p no:cacheprovider $(PYTEST_ARGS)

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) db.sqlite3* staticfiles artifacts
