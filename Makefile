# optnet: every command a user or CI needs. `make run` and `make test` work on a fresh clone
# with only Python 3.10+ present.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT := out

.PHONY: lp-hashes simgrid run test lint fuzz format bench bench-quick fidelity sweep sweep-realistic sweep-dask clean browser tutorial test-fast

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

## run: make the environment, install, solve the bundled realistic instance, print the report
run: $(STAMP)
	@mkdir -p $(OUT)
	$(BIN)/optnet solve instances/realistic.yaml -o $(OUT)/realistic.json --force --time-limit 120
	$(BIN)/optnet report $(OUT)/realistic.json
	$(BIN)/optnet report $(OUT)/realistic.json --format html --plots $(OUT)/plots -o $(OUT)/realistic.html --force
	@echo "HTML report: $(OUT)/realistic.html; plots in $(OUT)/plots"

## browser: headless Chromium for the HTML report test (Debian's package)
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  [ -n "$$OPTNET_CHROMIUM" ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "make: the HTML report test needs Chromium: run 'sudo apt-get install -y chromium' (Debian/Ubuntu) or set OPTNET_CHROMIUM=/path/to/chrome" >&2; exit 1; fi; }

## simgrid: SimGrid's Python module for `optnet simulate` (Debian's python3-simgrid, built for
## the system Python 3.11; the registry's simgrid is a source build that needs Boost and a C++
## toolchain)
simgrid:
	@$(PY) -c "import sys; sys.path.append('/usr/lib/python3/dist-packages'); import simgrid" 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-simgrid; \
	  else echo "make: optnet simulate needs SimGrid: run 'sudo apt-get install -y python3-simgrid' (Debian/Ubuntu)" >&2; exit 1; fi; }

## gnpy: GNPy itself in its own environment, so the export test runs the real tool
GNPY_STAMP := .venv-gnpy/.installed
$(GNPY_STAMP):
	$(PY) -m venv .venv-gnpy
	.venv-gnpy/bin/pip install --quiet 'gnpy==3.0.1'  # the version docs/interfaces.md checks
	touch $(GNPY_STAMP)
.PHONY: gnpy
gnpy: $(GNPY_STAMP)

## test: lint, format check, the whole test suite (pytest-xdist, one worker per core; each test file
## runs on one worker, so its module fixtures and caches are built once: --dist loadfile). The
## package's bytecode is compiled first: where PYTHONDONTWRITEBYTECODE is set (many CI images),
## every `python -m optnet` a test starts would compile optnet again (0.3 s each)
test: $(STAMP) browser simgrid $(GNPY_STAMP)
	$(BIN)/ruff check optnet tests bench
	$(BIN)/ruff format --check optnet tests bench
	$(BIN)/python -m compileall -q optnet bench
	OPTNET_GNPY_PYTHON=$(CURDIR)/.venv-gnpy/bin/python $(BIN)/python -m pytest -n auto --dist loadfile

## lp-hashes: rewrite tests/data/guards/lp_hashes.json (the joint MILP's LP text of every
## bundled instance, tests/test_guards.py); give the reason for a changed hash in CHANGELOG.md
lp-hashes: $(STAMP)
	$(BIN)/python -m bench.lp_hashes

## test-fast: lint and the suite without the slow modules (tests/conftest.py SLOW_MODULES), for
## the inner loop; `make test` is the whole suite and what CI runs
test-fast: $(STAMP)
	$(BIN)/ruff check optnet tests bench
	$(BIN)/python -m compileall -q optnet bench
	$(BIN)/python -m pytest -n auto --dist loadfile -m "not slow"

## fuzz: the fuzzing tier at length (hypothesis mutates results files and sweep stores; ~10 min)
fuzz: $(STAMP)
	OPTNET_FUZZ_EXAMPLES=$${OPTNET_FUZZ_EXAMPLES:-400} $(BIN)/python -m pytest tests/test_fuzz.py tests/test_hostile.py $(wildcard tests/test_sweep_store.py)

format: $(STAMP)
	$(BIN)/ruff format optnet tests bench
	$(BIN)/ruff check --fix optnet tests bench

## tutorial: run docs/tutorial.md's command blocks with this build and rewrite their outputs
## (tests/test_tutorial.py fails while they are stale)
tutorial: $(STAMP)
	$(BIN)/python -m bench.tutorial

## bench: the bundled instances (3 repeats), then the scale table 16 -> 512 servers (~30 min),
## then the HTML report at 64 -> 512 servers (target: 256 servers in < 30 s, < 5 MB; ~1 min)
bench: $(STAMP)
	$(BIN)/python -m bench.run
	$(BIN)/python -m bench.scale
	$(BIN)/python -m bench.report_scale

## fidelity: predicted vs measured busbw on every published nccl-tests table in
## bench/fidelity/tables (ideal and nccl profiles, default and calibrated; ~30 s)
fidelity: $(STAMP)
	$(BIN)/python -m bench.fidelity.run

## bench-quick: the bundled instances only
bench-quick: $(STAMP)
	$(BIN)/python -m bench.run

## sweep: the bundled sweeps on tiny and small (seconds); results in out/sweeps/NAME/
sweep: $(STAMP)
	$(BIN)/optnet sweep instances/sweeps/tiny-optics.yaml -o $(OUT)/sweeps/tiny-optics
	$(BIN)/optnet sweep instances/sweeps/small-transceivers.yaml -o $(OUT)/sweeps/small-transceivers

## sweep-realistic: job mixes x fibre type on the realistic pod (8 points, ~3 min on 2 cores); resumable
sweep-realistic: $(STAMP)
	$(BIN)/optnet sweep instances/sweeps/realistic-jobmix.yaml -o $(OUT)/sweeps/realistic-jobmix

## sweep-dask: the tiny sweep on a Dask LocalCluster (SCHEDULER=tcp://host:8786 for a running one)
sweep-dask: $(STAMP)
	$(BIN)/optnet sweep instances/sweeps/tiny-optics.yaml -o $(OUT)/sweeps/tiny-optics-dask --executor dask $(if $(SCHEDULER),--scheduler $(SCHEDULER))

clean:
	rm -rf $(VENV) .venv-gnpy $(OUT) .pytest_cache .ruff_cache
