# blksim: make demo | make test | make test-all | make bench | make bench-quick
# The virtual environment lives in .venv/ and is rebuilt when setup.cfg changes.
# PyPy: `make venv-pypy` builds .venv-pypy/; any target takes PYTHON=pypy3 to run there
# (`make demo PYTHON=pypy3`, `make test PYTHON=pypy3`).

PYTHON ?= python3
VENV := $(if $(findstring pypy,$(PYTHON)),.venv-pypy,.venv)
STAMP := $(VENV)/.installed
# CPython's environment has the optional Dask extra too (its sweep tests run on a local
# Dask cluster); PyPy's has the test tools only
comma := ,
EXTRAS := $(if $(findstring pypy,$(PYTHON)),test,test$(comma)dask)
PY := $(VENV)/bin/python
PYPY ?= pypy3
# PyPy sizes its young generation at half the last-level cache: on a server whose L3 is
# hundreds of MB that is a nursery of hundreds of MB, and as much resident memory. 4 MB
# (PyPy's own choice where the cache size is unknown) keeps a long replay near 130 MB.
export PYPY_GC_NURSERY ?= 4MB

.PHONY: demo test test-all bench bench-quick venv venv-pypy clean

$(STAMP): setup.cfg pyproject.toml
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

venv: $(STAMP)

venv-pypy:
	$(MAKE) venv PYTHON=$(PYPY)

demo: $(STAMP)
	$(VENV)/bin/blksim demo

test: $(STAMP)
	$(PY) -m pytest -q

test-all: $(STAMP)
	$(PY) -m pytest -q -m "slow or not slow"

# Under CPython, and under PyPy too when pypy3 is installed (its venv is built first).
# bench-quick: the replay, RAID, scheduler, multi-queue, explain and tenants figures at
# 200,000 requests, 2 rounds (under 3 minutes; benchmarks/run.py --help).
bench bench-quick: $(STAMP)
	@if command -v $(PYPY) >/dev/null 2>&1; then \
		$(MAKE) venv-pypy && $(PY) benchmarks/run.py $(QUICK) --pypy .venv-pypy/bin/python; \
	else \
		$(PY) benchmarks/run.py $(QUICK); \
	fi
bench-quick: QUICK := --quick

clean:
	rm -rf .venv .venv-pypy build *.egg-info .pytest_cache .hypothesis
