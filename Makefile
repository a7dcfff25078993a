# Two entry points (README): `make run` and `make test`. Both set everything up
# on a fresh machine that has python3 and make.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: setup run test bench profiles native

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

setup: $(STAMP) native

# The native board agent (native/: hp-agent, hp-plain), against the OpenVINO C++ API the
# openvino wheel ships. Its Debian packages are installed where we may (root); without a
# toolchain it is skipped with a line saying so, and its tests skip.
NATIVE_DEBS := cmake g++ make pkg-config libcurl4-openssl-dev nlohmann-json3-dev libssl-dev
NATIVE_BUILD := native/build
native: $(STAMP)
	@have() { command -v cmake >/dev/null && command -v g++ >/dev/null && [ -f /usr/include/nlohmann/json.hpp ] \
	  && ls /usr/include/*/curl/curl.h /usr/include/curl/curl.h 2>/dev/null | grep -q . && [ -f /usr/include/openssl/evp.h ]; }; \
	if ! have && [ "$$(id -u)" = 0 ] && [ -x /usr/bin/apt ]; then \
	  echo "make native: installing $(NATIVE_DEBS) (the native board agent's toolchain and headers), waiting up to $(APT_LOCK_S) s for the dpkg lock"; \
	  (apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_S) update && \
	   DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_S) install -y $(NATIVE_DEBS)) >/dev/null || true; fi; \
	if ! have; then echo "native agent not built: needs $(NATIVE_DEBS) (apt-get install); its tests skip"; exit 0; fi; \
	ov=$$($(PY) -c "import openvino, os; print(os.path.join(os.path.dirname(openvino.__file__), 'cmake'))") && \
	nice -n 10 cmake -S native -B $(NATIVE_BUILD) -DCMAKE_BUILD_TYPE=Release -DOpenVINO_DIR=$$ov >/dev/null && \
	nice -n 10 cmake --build $(NATIVE_BUILD) -j2

PORT ?= 8000
DATA ?= data
# make test: how long apt-get waits for a dpkg lock another process holds (unattended upgrades)
APT_LOCK_S ?= 600

# The service: REST API on localhost:$(PORT), Swagger UI at /docs, SQLite under $(DATA)/.
run: $(STAMP)
	$(VENV)/bin/planner serve --port $(PORT) --data-dir $(DATA)

# The service tests drive Debian's chromium (Swagger UI, headless) and a throwaway
# PostgreSQL cluster (DATABASE_URL); installed when missing (CI runs as root).
test: $(STAMP) native
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
