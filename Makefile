# One command each on a fresh clone: `make demo`, `make test`, `make bench`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: venv
	$(VENV)/bin/poise demo

test: venv
	$(PY) -m ruff check robots design trajectories identify drivers poise tests bench
	$(PY) -m pytest -q

bench: venv
	mkdir -p bench/results
	$(PY) -m bench --out bench/results

lint: venv
	$(PY) -m ruff format robots design trajectories identify drivers poise tests bench
	$(PY) -m ruff check --fix robots design trajectories identify drivers poise tests bench

clean:
	rm -rf $(VENV) build *.egg-info
