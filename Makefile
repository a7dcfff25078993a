# Two entry points (README): `make run` and `make test`. Both set everything up
# on a fresh machine that has python3 and make.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: setup run test bench profiles

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

PORT ?= 8000
DATA ?= data

# The service: REST API on localhost:$(PORT), Swagger UI at /docs, SQLite under $(DATA)/.
run: $(STAMP)
	$(VENV)/bin/planner serve --port $(PORT) --data-dir $(DATA)

# The service tests drive Debian's chromium (Swagger UI, headless) and a throwaway
# PostgreSQL cluster (DATABASE_URL); installed when missing (CI runs as root).
test: $(STAMP)
	(command -v chromium && ls /usr/lib/postgresql/*/bin/initdb) >/dev/null 2>&1 || \
	  (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium postgresql)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/dp.py
	$(PY) bench/mosaic.py
	$(PY) bench/service.py
	$(PY) bench/abuse.py
	$(PY) bench/energy_cap.py
	$(PY) bench/multiapp.py
	$(PY) bench/within_layer.py
	$(PY) bench/fidelity.py
	$(PY) bench/loop.py
	$(PY) bench/schedule_fidelity.py
	$(PY) bench/schedule_auto.py

profiles: $(STAMP)
	$(PY) -m profiles.generate
	$(PY) -m profiles.generate_xavier
