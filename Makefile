# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: demo test lint clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# Embedded default: SQLite under var/, Celery tasks run in-process. Loads the demo corpus,
# validates to standstill, prints the URL and the demo login, then serves the dashboard.
# The demo replays through the shipped simulated harness; point CAUTERWEB_REPLAY_BACKEND at a
# real harness (or set it empty for forward trials only) to change that.
demo: export CAUTERWEB_REPLAY_BACKEND ?= replay.backends.simulated:replay
demo: export DEBUG ?= true
demo: $(BIN)/.installed
	$(BIN)/python manage.py demo_setup --url http://$(HOST):$(PORT)/
	$(BIN)/python manage.py runserver --noreload $(HOST):$(PORT)

test: $(BIN)/.installed
	$(BIN)/python -m pytest

lint: $(BIN)/.installed
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) var staticfiles
