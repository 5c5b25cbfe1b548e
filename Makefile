# One command each on a fresh clone: `make demo`, `make test`, `make bench`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# two pytest workers on two cores, each with single-threaded BLAS/OpenMP: no oversubscription, and results that
# do not depend on how the threads were scheduled (an optimiser started from bit-different numbers may end
# in another local minimum). A third worker fills the time the emulated benches wait on their clocks (CPU 166 %
# -> 188 %, 20:54 -> 18:23-18:59) but starves the drivers' threads: in 2 of 3 runs (2026-11-29) twin and
# kinematic runs lost ticks (recording gaps of 0.1-0.25 s) or stopped on a link timeout.
# --no-loadscope-reorder: files in collection order, where tests/conftest.py puts the long end-to-end modules
# first (xdist's default, most tests first, started the two-test demo module last)
# OPENBLAS_CORETYPE=Haswell: the same BLAS kernels on every x86-64 machine. OpenBLAS picks them by CPU, and the
# designs are chaotic in the last bit: on an AVX-512 machine (2026-11-29) the single-support TUlip design of
# seed 14 ended at κ 73 322 with its kernels, at 327 (as on the AVX2 machines the tests were tuned on) with these
TEST_ENV := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_CORETYPE=Haswell
TEST_WORKERS ?= 2

.PHONY: demo demo-arm demo-standing test bench lint venv clean pynumero

venv: $(STAMP)

# constraints.txt: the tested versions (a fresh install otherwise takes the newest releases, which moved results)
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: venv
	$(VENV)/bin/poise demo
	$(VENV)/bin/poise demo arm
	$(VENV)/bin/poise demo standing

# the dynamic pipelines alone: a UR5 arm's excitation identified from its motor currents (out/demo_arm), TUlip's
# balance-constrained excitation identified from the boards' wrench (out/demo_standing); each prints its commands
demo-arm: venv
	$(VENV)/bin/poise demo arm

demo-standing: venv
	$(VENV)/bin/poise demo standing

test: venv pynumero
	$(PY) -m ruff check formats robots design trajectories identify drivers poise tests bench
	$(PY) -m ruff format --check formats robots design trajectories identify drivers poise tests bench
	$(TEST_ENV) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

bench: venv pynumero
	mkdir -p bench/results
	$(PY) -m bench --out bench/results

# PyNumero's ASL interface (Pyomo's cyipopt solver needs it), built from the CMake sources Pyomo ships,
# against the system AMPL solver library (Debian: libamplsolver-dev). No downloads; design/pyomo_backend.py
# loads it from $(VENV)/pyomo/lib (PYOMO_CONFIG_DIR layout).
ASL_INC := /usr/include/ampl-netlib-solvers
ASL_LIB := $(VENV)/pyomo/lib/libpynumero_ASL.so

pynumero: $(ASL_LIB)

$(ASL_LIB): $(STAMP)
	test -f $(ASL_INC)/asl_pfgh.h || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libamplsolver-dev; }
	rm -rf build/pynumero && mkdir -p build/pynumero $(VENV)/pyomo/lib
	src=$$($(PY) -c 'import os, pyomo.contrib.pynumero as p; print(os.path.join(os.path.dirname(p.__file__), "src"))'); \
	lib=$$(ls /usr/lib/*/libamplsolver.so /usr/lib/libamplsolver.so 2>/dev/null | head -n 1); \
	cmake -S "$$src" -B build/pynumero -DCMAKE_BUILD_TYPE=Release -DENABLE_HSL=OFF -DBUILD_MA27=OFF \
	  -DASL_INCLUDE_DIR=$(ASL_INC) -DASL_LIBRARY="$$lib" -DCMAKE_INSTALL_PREFIX=$(abspath $(VENV))/pyomo >/dev/null
	cmake --build build/pynumero -j 2 >/dev/null
	cmake --install build/pynumero >/dev/null
	test -f $(ASL_LIB)

lint: venv
	$(PY) -m ruff format formats robots design trajectories identify drivers poise tests bench
	$(PY) -m ruff check --fix formats robots design trajectories identify drivers poise tests bench

clean:
	rm -rf $(VENV) build *.egg-info
