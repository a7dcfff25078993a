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

run: $(STAMP)
	$(VENV)/bin/planner solve --platform profiles/platforms/hikey970.json --profile profiles/models/mobilenet_v2_1.4.json --objective latency
	$(VENV)/bin/planner solve --platform profiles/platforms/hikey970.json --profile profiles/models/mobilenet_v2_1.4.json --objective energy

test: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/dp.py

profiles: $(STAMP)
	$(PY) -m profiles.generate
