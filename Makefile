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
# make test: how long apt-get waits for a dpkg lock another process holds (unattended upgrades)
APT_LOCK_S ?= 600

# The service: REST API on localhost:$(PORT), Swagger UI at /docs, SQLite under $(DATA)/.
run: $(STAMP)
	$(VENV)/bin/planner serve --port $(PORT) --data-dir $(DATA)

# The service tests drive Debian's chromium (Swagger UI, headless) and a throwaway
# PostgreSQL cluster (DATABASE_URL); installed when missing (CI runs as root).
test: $(STAMP)
	@(command -v chromium && ls /usr/lib/postgresql/*/bin/initdb) >/dev/null 2>&1 || \
	  (echo "make test: installing chromium (the UI and Swagger tests drive it headless) and postgresql (a throwaway cluster for the PostgreSQL tests) with apt-get, waiting up to $(APT_LOCK_S) s for the dpkg lock" && \
	   apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_S) update && \
	   DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_S) install -y chromium postgresql)
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
