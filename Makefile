# Build, check and lint the SageMaker MXNet + Horovod training image. `make` lists the targets.
#
# Networks with a TLS-intercepting proxy and/or a private package index:
#   make build CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt PIP_INDEX_URL=https://pypi.example.com/simple
# CA_BUNDLE reaches the build as an optional BuildKit secret: pip inside the build trusts it, and it
# never lands in an image layer. PIP_INDEX_URL is a build arg of the builder stages only. Both are
# empty by default, which is right for a machine with direct access to PyPI; they apply to `make
# tools` (the host's .venv) too. The team's machines sit behind such a proxy, so CI there passes
# CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt.
#
# Two flavors from the same Dockerfile: `make build` ($(IMAGE_REPO):cpu) and `make build-gpu`
# ($(IMAGE_REPO):gpu), its target `image` with the build arg FLAVOR=cpu or gpu (and so `lock`/`lock-gpu`).
# The GPU build needs no GPU: its checks run at build time (see docker/Dockerfile).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
# Targets run in the order given (test = lint, build, structure-test, pytest), even under -j.
.NOTPARALLEL:

# Debian's docker client (20.10) builds through the daemon's BuildKit without the buildx plugin;
# the Dockerfile needs BuildKit for its secret and bind mounts.
DOCKER ?= /usr/bin/docker
export DOCKER_BUILDKIT := 1

IMAGE_REPO ?= sagemaker-mxnet-horovod
BASE_IMAGE ?= debian:bookworm-slim
# Used only when BASE_IMAGE is neither local nor pullable (scripts/build-base-image.sh).
DEBIAN_MIRROR ?= http://deb.debian.org/debian
CA_BUNDLE ?=
PIP_INDEX_URL ?=
# Python that creates the tools venv and runs the demo. The host side (tests, scripts/, benchmarks/, examples/)
# supports Python 3.10 (Ubuntu 22.04's python3) and newer (Debian 12's is 3.11.2); CI runs the unit tests on the
# lowest and highest it has (docs/testing.md). An older one is refused before a venv is made.
PYTHON ?= python3
HOST_PYTHON_MIN := 3.10
# The tools venv (make tools): VENV is a link to a venv kept in VENV_CACHE, keyed by requirements-dev.txt's content
# and the Python, so that a fresh clone reuses it (scripts/cached_venv.sh; the SDK and audit venvs alike).
# VENV_CACHE= (empty) makes every venv in the clone itself instead.
VENV ?= .venv
VENV_CACHE ?= $(if $(XDG_CACHE_HOME),$(XDG_CACHE_HOME),$(HOME)/.cache)/sagemaker-mxnet-horovod
PY := $(VENV)/bin/python
# Build cache from earlier pushed images (CodeBuild, see buildspec.yml): CACHE_FROM="REF ..." adds
# --cache-from REF for each; BUILDKIT_INLINE_CACHE=1 stores the cache metadata in the image itself, so that
# once pushed it can serve as the next build's cache.
CACHE_FROM ?=
BUILDKIT_INLINE_CACHE ?=
# structure-test and structure-test-gpu write JUnit XML here (structure-<image>.xml) when it is set.
STRUCTURE_REPORT_DIR ?=
# make push / make pull-cache (scripts/push.sh): the ECR repository, the flavors, DRY_RUN=1 prints only.
# Account and region come from AWS_ACCOUNT_ID and AWS_REGION, else from the AWS CLI.
ECR_REPO ?= $(IMAGE_REPO)
FLAVORS ?= cpu gpu
DRY_RUN ?=

DOCKERFILE := docker/Dockerfile
CPU_TAG := $(IMAGE_REPO):cpu
GPU_TAG := $(IMAGE_REPO):gpu
# Test-only image (structure-test-gpu): the GPU image plus a libcuda.so.1 stub. Its own repository, so
# `make size` does not list it; `make clean` removes it (it carries the image title label).
GPU_STUB_TEST_TAG := $(IMAGE_REPO)-test:gpu-stub-driver
# `make size` fails if the GPU image is larger (MiB; the AWS DLC MXNet GPU image is 7159 MiB).
GPU_SIZE_LIMIT_MIB ?= 3500
VCS_REF := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LINT_DIRS := $(wildcard container entrypoints examples tests docker scripts benchmarks)
# Every shell script: the Dockerfile's RUN bodies in docker/, the scripts, CI's entry point.
SHELL_SCRIPTS := $(sort $(shell find docker -name '*.sh')) $(wildcard scripts/*.sh) .ci/run

comma := ,
# The first command of every recipe that makes a venv with, or runs, $(PYTHON): an older Python than
# HOST_PYTHON_MIN (or none) stops make there, naming what it found.
check_python = @found=$$($(PYTHON) -c 'import sys; print(".".join(map(str, sys.version_info[:3])))' 2>/dev/null) \
  || { echo "make: PYTHON=$(PYTHON) does not run; the host side needs Python $(HOST_PYTHON_MIN) or newer" \
    "(pass PYTHON=/path/to/python3.X)" >&2; exit 1; }; \
  IFS=. read -r major minor _ <<<"$$found"; IFS=. read -r need_major need_minor <<<"$(HOST_PYTHON_MIN)"; \
  if ! [[ "$$major.$$minor" =~ ^[0-9]+\.[0-9]+$$ ]] \
    || (( major < need_major || (major == need_major && minor < need_minor) )); then \
    echo "make: PYTHON=$(PYTHON) is Python $$found; the host side needs Python $(HOST_PYTHON_MIN) or newer" \
      "(pass PYTHON=/path/to/python3.X)" >&2; exit 1; \
  fi
build_args = --build-arg BASE_IMAGE=$(BASE_IMAGE) \
  $(if $(PIP_INDEX_URL),--build-arg PIP_INDEX_URL=$(PIP_INDEX_URL)) \
  $(if $(CA_BUNDLE),--secret id=ca$(comma)src=$(CA_BUNDLE))
pip_net_args = $(if $(CA_BUNDLE),--cert $(CA_BUNDLE)) $(if $(PIP_INDEX_URL),--index-url $(PIP_INDEX_URL))
# $(call cached_venv,LINK,REQUIREMENTS): the venv of REQUIREMENTS at LINK, from VENV_CACHE when made before.
cached_venv = VENV_CACHE="$(VENV_CACHE)" scripts/cached_venv.sh $(PYTHON) $(1) $(2) $(pip_net_args)
cache_args = $(foreach ref,$(CACHE_FROM),--cache-from $(ref)) \
  $(if $(filter 1,$(BUILDKIT_INLINE_CACHE)),--build-arg BUILDKIT_INLINE_CACHE=1)
# $(call structure_test,REPORT_NAME,IMAGE,--config ...). With a report, container-structure-test writes only
# the report, so junit_summary.py puts the counts and failures into the log; the exit status stays the test's.
structure_test = $(if $(STRUCTURE_REPORT_DIR),mkdir -p $(STRUCTURE_REPORT_DIR); status=0; \
  $(VENV)/bin/container-structure-test test --image $(2) $(3) \
    --output junit --test-report $(STRUCTURE_REPORT_DIR)/structure-$(1).xml || status=$$?; \
  $(PY) scripts/junit_summary.py $(STRUCTURE_REPORT_DIR)/structure-$(1).xml; exit $$status, \
  $(VENV)/bin/container-structure-test test --image $(2) $(3))

.PHONY: help build build-gpu base-image lock lock-gpu structure-test structure-test-gpu lint size clean tools \
  test unit check-ca check-python image-tests demo push pull-cache fault-tests fault-report sbom audit

help: ## List the targets (default)
	@echo "usage: make TARGET [IMAGE_REPO=...] [BASE_IMAGE=...] [CA_BUNDLE=FILE] [PIP_INDEX_URL=URL]"
	@echo "venvs (tools, SDK, audit): links into VENV_CACHE=$(VENV_CACHE), reused across clones; VENV_CACHE= makes them here"
	@echo "make test: lanes logged in TEST_LOG_DIR=$(TEST_LOG_DIR); IMAGE_TESTS=, SDK_TESTS=, HOST_TESTS= narrow it (docs/testing.md)"
	@awk -F ':.*## ' '/^[a-z][a-z-]*:.*## / {printf "  %-19s %s\n", $$1, $$2}' $(MAKEFILE_LIST) \
	  | sed 's|$$(IMAGE_REPO)|$(IMAGE_REPO)|g'

build: check-ca base-image ## Build the CPU image $(IMAGE_REPO):cpu
	$(DOCKER) build -f $(DOCKERFILE) --target image --build-arg FLAVOR=cpu -t $(CPU_TAG) \
	  $(build_args) $(cache_args) --build-arg VCS_REF=$(VCS_REF) .

build-gpu: check-ca base-image ## Build the GPU image $(IMAGE_REPO):gpu (CUDA 11.8, cuDNN 8, NCCL; no GPU needed)
	$(DOCKER) build -f $(DOCKERFILE) --target image --build-arg FLAVOR=gpu -t $(GPU_TAG) \
	  $(build_args) $(cache_args) --build-arg VCS_REF=$(VCS_REF) .

base-image: ## Make sure BASE_IMAGE is local: use it, else pull it, else debootstrap it (Debian)
	@if $(DOCKER) image inspect "$(BASE_IMAGE)" >/dev/null 2>&1; then \
	  echo "base-image: using local $(BASE_IMAGE)"; \
	elif out=$$($(DOCKER) pull "$(BASE_IMAGE)" 2>&1); then \
	  echo "base-image: pulled $(BASE_IMAGE)"; \
	else \
	  echo "base-image: cannot pull $(BASE_IMAGE): $$(tail -n 1 <<<"$$out")"; \
	  case "$(BASE_IMAGE)" in \
	    debian:*|library/debian:*|docker.io/debian:*|docker.io/library/debian:*) ;; \
	    *) echo "base-image: the debootstrap fallback only builds debian:<suite> images" >&2; exit 1;; \
	  esac; \
	  suite="$(BASE_IMAGE)"; suite="$${suite##*:}"; suite="$${suite%-slim}"; \
	  case "$$suite" in 11) suite=bullseye;; 12) suite=bookworm;; 13) suite=trixie;; latest) suite=stable;; esac; \
	  echo "base-image: building $(BASE_IMAGE) with debootstrap ($$suite from $(DEBIAN_MIRROR))"; \
	  DOCKER="$(DOCKER)" scripts/build-base-image.sh "$(BASE_IMAGE)" "$$suite" "$(DEBIAN_MIRROR)"; \
	fi

lock: check-ca base-image ## Re-resolve docker/constraints-cpu.txt from the Dockerfile ARGs
	$(DOCKER) build -f $(DOCKERFILE) --target lock-export --build-arg FLAVOR=cpu --output type=local,dest=docker \
	  $(build_args) .
	@echo "lock: wrote docker/constraints-cpu.txt; rebuild with make build"

lock-gpu: check-ca base-image ## Re-resolve docker/constraints-gpu.txt from the Dockerfile ARGs
	$(DOCKER) build -f $(DOCKERFILE) --target lock-export --build-arg FLAVOR=gpu --output type=local,dest=docker \
	  $(build_args) .
	@echo "lock-gpu: wrote docker/constraints-gpu.txt; rebuild with make build-gpu"

structure-test: tools ## Run tests/structure/{common,cpu,supply-chain}.yaml against $(IMAGE_REPO):cpu
	@$(DOCKER) image inspect $(CPU_TAG) >/dev/null 2>&1 \
	  || { echo "structure-test: no image $(CPU_TAG); run make build first" >&2; exit 1; }
	$(call structure_test,cpu,$(CPU_TAG),--config tests/structure/common.yaml --config tests/structure/cpu.yaml \
	  --config tests/structure/supply-chain.yaml)

# gpu.yaml runs on the image itself. common.yaml imports mxnet, which needs libcuda.so.1: it runs on
# the image plus a stub of it (Dockerfile target gpu-stub-driver-test, built from the cache).
structure-test-gpu: tools ## Run tests/structure/{gpu,supply-chain}.yaml on $(IMAGE_REPO):gpu, common.yaml on it + a libcuda stub
	@$(DOCKER) image inspect $(GPU_TAG) >/dev/null 2>&1 \
	  || { echo "structure-test-gpu: no image $(GPU_TAG); run make build-gpu first" >&2; exit 1; }
	$(call structure_test,gpu,$(GPU_TAG),--config tests/structure/gpu.yaml --config tests/structure/supply-chain.yaml)
	$(DOCKER) build -f $(DOCKERFILE) --target gpu-stub-driver-test --build-arg FLAVOR=gpu -t $(GPU_STUB_TEST_TAG) \
	  $(build_args) --build-arg VCS_REF=$(VCS_REF) .
	$(call structure_test,gpu-stub-driver,$(GPU_STUB_TEST_TAG),--config tests/structure/common.yaml)

lint: tools ## ruff on the Python code, hadolint on the Dockerfiles, shellcheck on the shell scripts
	@status=0; \
	echo "ruff check $(LINT_DIRS)"; $(VENV)/bin/ruff check $(LINT_DIRS) || status=1; \
	echo "hadolint $(DOCKERFILE) tests/image/Dockerfile"; $(VENV)/bin/hadolint --config .hadolint.yaml $(DOCKERFILE) tests/image/Dockerfile || status=1; \
	echo "shellcheck $(SHELL_SCRIPTS)"; $(VENV)/bin/shellcheck $(SHELL_SCRIPTS) || status=1; \
	exit $$status

size: ## Print the size of every $(IMAGE_REPO) tag (cpu, gpu) in MiB; fail if gpu is over GPU_SIZE_LIMIT_MIB
	@refs=$$($(DOCKER) image ls "$(IMAGE_REPO)" --format '{{.Repository}}:{{.Tag}}' | grep -v '<none>' || true); \
	[ -n "$$refs" ] || { echo "size: no $(IMAGE_REPO) images"; exit 0; }; \
	status=0; \
	for ref in $$refs; do \
	  mib=$$(( $$($(DOCKER) image inspect -f '{{.Size}}' "$$ref") / 1048576 )); \
	  if [ "$$ref" = "$(GPU_TAG)" ]; then \
	    if [ $$mib -gt $(GPU_SIZE_LIMIT_MIB) ]; then note="OVER the $(GPU_SIZE_LIMIT_MIB) MiB limit"; status=1; \
	    else note="(limit $(GPU_SIZE_LIMIT_MIB) MiB)"; fi; \
	  else note=""; fi; \
	  printf '%-40s %6d MiB %s\n' "$$ref" $$mib "$$note"; \
	done; \
	exit $$status

clean: ## Remove the $(IMAGE_REPO) images and the .venv link (keeps BASE_IMAGE, the build cache, VENV_CACHE)
	@ids=$$( { $(DOCKER) image ls -q "$(IMAGE_REPO)"; \
	  $(DOCKER) image ls -q --filter label=org.opencontainers.image.title=sagemaker-mxnet-horovod; } | sort -u); \
	if [ -n "$$ids" ]; then $(DOCKER) image rm -f $$ids; fi
	rm -rf $(VENV)

tools: check-ca ## Make .venv with the pinned tools of requirements-dev.txt (a link into VENV_CACHE; VENV=, VENV_CACHE=)
	$(check_python)
	$(call cached_venv,$(VENV),requirements-dev.txt)

# make test (docs/testing.md, "The time budget"): lint and the CPU image, then two lanes at once, each logged to
# TEST_LOG_DIR/LANE.log and streamed with its name (scripts/test_lanes.py): the image's tests in one container
# (CPU-bound) then the SDK's, and on the host the images' structure tests, the GPU image's build, size and SBOMs,
# then the host's tests (much of it waiting for containers and timeouts). Tests marked `alone` (their verdict needs
# CPU time to spare: pytest.ini) run after both lanes, by themselves. Any failure, of a pre-step, a lane or the last
# phase, fails make test.
# --durations: the slowest tests in every log, for keeping make test within its time budget.
TEST_LOG_DIR ?= out/test
# What image-tests, sdk-tests and host-tests run; a subset narrows them (make test HOST_TESTS=tests/unit/core).
IMAGE_TESTS ?= tests/programs tests/toolkit tests/image
SDK_TESTS ?= tests/sdk
HOST_TESTS ?= tests/unit tests/structure tests/benchmarks tests/integration tests/faults
# pytest -m for image-tests, sdk-tests and host-tests (make test's lanes: 'not alone', its last phase: alone); empty,
# every test. A selection that leaves no test in a target is no failure there.
TEST_MARK ?=
# Hours make test waits for its lanes and its last phase before it ends them, saying which were still running.
TEST_DEADLINE_H ?= 3
# The GPU image's steps in the host lane; GPU_STEPS= leaves them out (a quick local run; CI keeps them).
GPU_STEPS ?= build-gpu structure-test-gpu
pytest_selection = -p no:cacheprovider --durations=20 $(if $(TEST_MARK),-m '$(TEST_MARK)')
none_selected = { status=$$?; [ $$status -eq 5 ] && [ -n "$(TEST_MARK)" ] || exit $$status; \
  echo "$@: no test here is selected by -m '$(TEST_MARK)'"; }

test: check-python tools lint build ## everything CI runs: lint, both images and their structure tests, then all tests (two lanes at once, then the `alone` tests)
	$(PYTHON) scripts/test_lanes.py --log-dir $(TEST_LOG_DIR) --deadline-h $(TEST_DEADLINE_H) \
	  --lane "image=$(MAKE) --no-print-directory -k image-tests sdk-tests TEST_MARK='not alone'" \
	  --lane "host=$(MAKE) --no-print-directory -k structure-test $(GPU_STEPS) size sbom host-tests \
	    TEST_MARK='not alone'" \
	  --then "alone=$(MAKE) --no-print-directory -k image-tests sdk-tests host-tests TEST_MARK=alone"

host-tests: check-python tools ## The host's tests (HOST_TESTS: unit, structure, benchmarks, jobs across containers, fault scenarios)
	DOCKER=$(DOCKER) IMAGE=$(CPU_TAG) $(PY) -m pytest $(pytest_selection) $(HOST_TESTS) || $(none_selected)

# The fast loop: host-only tests, no image, no Docker daemon needed by most (seconds). tests/structure's
# static tests read the build files; test_push.py runs make push against a fake aws and docker; tests/benchmarks
# checks the studies' arithmetic on small records.
unit: tools ## Host unit tests (tests/unit, tests/structure/test_*.py, tests/benchmarks) in seconds, no image build
	$(PY) -m pytest -p no:cacheprovider -q tests/unit tests/structure tests/benchmarks

# Supply chain (docs/supply-chain.md). Each image carries its SBOM and license report in /usr/share/sbom,
# written by its build; `make sbom` copies them out, `make audit` checks its Python packages for advisories.
SBOM_DIR ?= out/sbom
AUDIT_VENV ?= .cache/audit
# 1: an unreachable advisory database fails make audit (CodeBuild); otherwise it is reported and skipped.
AUDIT_STRICT ?=
sbom: ## Copy each built flavor's SBOM (CycloneDX) and license report to out/sbom/FLAVOR/ (SBOM_DIR, FLAVORS)
	@found=0; for flavor in $(FLAVORS); do \
	  image=$(IMAGE_REPO):$$flavor; \
	  if ! $(DOCKER) image inspect "$$image" >/dev/null 2>&1; then echo "sbom: no image $$image, skipped"; continue; fi; \
	  rm -rf "$(SBOM_DIR)/$$flavor"; mkdir -p "$(SBOM_DIR)/$$flavor"; \
	  $(DOCKER) run --rm --entrypoint tar "$$image" -C /usr/share/sbom -c . | tar -x -C "$(SBOM_DIR)/$$flavor"; \
	  $(DOCKER) image inspect -f '{{.Id}} revision={{index .Config.Labels "org.opencontainers.image.revision"}}' \
	    "$$image" > "$(SBOM_DIR)/$$flavor/image.txt"; \
	  echo "sbom: $$image -> $(SBOM_DIR)/$$flavor/ ($$(ls "$(SBOM_DIR)/$$flavor" | paste -sd' '))"; \
	  found=1; \
	done; \
	[ $$found = 1 ] || { echo "sbom: none of $(FLAVORS) is built; run make build" >&2; exit 1; }

audit: sbom check-ca ## Fail on fixable HIGH/CRITICAL advisories in the images' Python packages (pip-audit, OSV; needs internet)
	$(check_python)
	$(call cached_venv,$(AUDIT_VENV),requirements-audit.txt)
	$(if $(CA_BUNDLE),REQUESTS_CA_BUNDLE=$(CA_BUNDLE)) $(AUDIT_VENV)/bin/python scripts/audit.py --pip-audit $(AUDIT_VENV)/bin/pip-audit \
	  --allowlist docker/audit-allowlist.toml $(if $(filter 1,$(AUDIT_STRICT)),--strict) $(SBOM_DIR)/*/sbom.cdx.json

demo: check-python build ## The main job: a 2-host MNIST training on two local containers of the CPU image
	DOCKER=$(DOCKER) $(PYTHON) scripts/demo.py --image $(CPU_TAG)

# AWS_ACCOUNT_ID, AWS_REGION and AWS_PROFILE reach scripts/push.sh from the environment or the command line.
push_env = DOCKER="$(DOCKER)" IMAGE_REPO="$(IMAGE_REPO)" ECR_REPO="$(ECR_REPO)" FLAVORS="$(FLAVORS)" DRY_RUN="$(DRY_RUN)"
push: ## Push $(IMAGE_REPO):FLAVOR to ECR as FLAVOR and FLAVOR-<git sha> (FLAVORS, ECR_REPO; DRY_RUN=1 prints only)
	$(push_env) scripts/push.sh push

pull-cache: ## Log in to ECR and pull the last pushed FLAVORS, as build cache (none pushed yet is fine)
	$(push_env) scripts/push.sh pull-cache

fault-tests: ## The fault-injection suite alone (tests/faults, part of make test): scenarios, exits, a report table
	DOCKER=$(DOCKER) IMAGE=$(CPU_TAG) $(PY) -m pytest -p no:cacheprovider tests/faults

fault-report: check-python ## The fault scenarios under this launcher and the sagemaker-training toolkit's, side by side (slow)
	DOCKER=$(DOCKER) PYTHONPATH=scripts:container/src $(PYTHON) tests/faults/report.py --launcher both --image $(CPU_TAG)

CPU_TEST_TAG := $(IMAGE_REPO):cpu-test
image-tests: ## Run IMAGE_TESTS (tests/programs, tests/toolkit, tests/image) inside the CPU image (its MXNet, Horovod, mpirun, sagemaker-training)
	@$(DOCKER) image inspect $(CPU_TAG) >/dev/null 2>&1 \
	  || { echo "image-tests: no image $(CPU_TAG); run make build first" >&2; exit 1; }
	$(DOCKER) build -q -f tests/image/Dockerfile --build-arg IMAGE=$(CPU_TAG) -t $(CPU_TEST_TAG) \
	  $(if $(CA_BUNDLE),--secret id=ca$(comma)src=$(CA_BUNDLE)) tests/image
	$(DOCKER) run --rm -v $(CURDIR):/src:ro -w /src -e TESTS_MUST_NOT_SKIP=1 $(CPU_TEST_TAG) \
	  python -m pytest $(pytest_selection) $(IMAGE_TESTS) || $(none_selected)

# SageMaker Python SDK v2 and v3, each in its own venv (pinned in tests/sdk/requirements-v*.txt), links in
# SDK_VENVS to venvs in VENV_CACHE like the tools' (a changed file gets a new venv). Cold, 2 cores: about 40 s for
# v2, 2 min for v3 (it pulls in mlflow, pandas, pyarrow).
SDK_VENVS ?= .cache
.PHONY: sdk-tests sdk-venvs host-tests
sdk-venvs: check-ca ## Make the SageMaker SDK v2 and v3 venvs of make sdk-tests (SDK_VENVS/sdk-v2, sdk-v3: links into VENV_CACHE)
	$(check_python)
	$(call cached_venv,$(SDK_VENVS)/sdk-v2,tests/sdk/requirements-v2.txt)
	$(call cached_venv,$(SDK_VENVS)/sdk-v3,tests/sdk/requirements-v3.txt)

sdk-tests: tools sdk-venvs ## SDK local mode through the real SageMaker SDK v2 and v3: 2-host MNIST on $(IMAGE_REPO):cpu
	@$(DOCKER) image inspect $(CPU_TAG) >/dev/null 2>&1 \
	  || { echo "sdk-tests: no image $(CPU_TAG); run make build first" >&2; exit 1; }
	DOCKER=$(DOCKER) IMAGE=$(CPU_TAG) TESTS_MUST_NOT_SKIP=1 \
	  SDK_V2_PYTHON=$(abspath $(SDK_VENVS))/sdk-v2/bin/python SDK_V3_PYTHON=$(abspath $(SDK_VENVS))/sdk-v3/bin/python \
	  $(PY) -m pytest $(pytest_selection) $(SDK_TESTS) || $(none_selected)

check-python:
	$(check_python)

check-ca:
	@if [ -n "$(CA_BUNDLE)" ] && [ ! -f "$(CA_BUNDLE)" ]; then \
	  echo "CA_BUNDLE=$(CA_BUNDLE): no such file" >&2; exit 1; fi
