# optnet: every command a user or CI needs. `make run` and `make test` work on a fresh clone
# with only Python 3.10+ present.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT := out

.PHONY: run test lint format bench sweep clean

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

## test: lint, format check, the whole test suite
test: $(STAMP)
	$(BIN)/ruff check optnet tests bench
	$(BIN)/ruff format --check optnet tests bench
	$(BIN)/python -m pytest

format: $(STAMP)
	$(BIN)/ruff format optnet tests bench
	$(BIN)/ruff check --fix optnet tests bench

## bench: timing and quality table (see bench/README in the README's Benchmarks section)
bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache
