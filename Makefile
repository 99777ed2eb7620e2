# vacuum-operator developer targets. `make help` lists them.

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

## The Go toolchain: go.mod's `go` line. A machine's own Go (1.26.8 here, GOTOOLCHAIN=local in its
## go.env) does not switch by itself, so every go command here runs with it named explicitly; the
## module proxy serves it (about 76 MB, fetched once per machine into the module cache).
export GOTOOLCHAIN := go$(shell awk '$$1 == "go" { print $$2; exit }' $(CURDIR)/go.mod)

## Tool binaries and versions (installed into ./bin by `go install`)
LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint
## golangci-lint at GOLANGCI_LINT_VERSION with kube-api-linter compiled in; both pinned in
## hack/kubeapilint/go.mod (a module of its own, built from the module proxy).
KUBEAPILINT ?= $(LOCALBIN)/kubeapilint
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0

## envtest control plane (kube-apiserver, etcd, kubectl), built from the Go module proxy
SETUP_ENVTEST ?= hack/setup-envtest.sh

## envtest's default 20 s control-plane start timeout is too short on a loaded 2-core machine.
export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT ?= 120s
export KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT ?= 60s

## Tests: packages in RACE_PKGS run with -race, all others without. TEST_ARGS adds go test flags,
## e.g. make test TEST_ARGS='-run TestFoo -v'
RACE_PKGS ?= ./internal/...
TEST_ARGS ?=

# Binaries built by `make build`, one per cmd/ directory that exists.
CMDS := $(notdir $(wildcard cmd/manager cmd/vacuum-runner cmd/kubectl-vacuum))
# controller-gen only runs once there are API types.
API_GO_FILES := $(wildcard api/*/*.go)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRDs, RBAC and webhook manifests into config/.
ifneq ($(API_GO_FILES),)
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./..." output:crd:artifacts:config=config/crd/bases
else
	@echo "manifests: no API types under api/ yet, nothing to generate"
endif

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods (zz_generated.deepcopy.go).
ifneq ($(API_GO_FILES),)
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."
else
	@echo "generate: no API types under api/ yet, nothing to generate"
endif

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: golangci-lint kubeapilint ## Run golangci-lint (config: .golangci.yml), then kube-api-linter on api/ (lint-api).
	$(GOLANGCI_LINT) run ./...
	$(KUBEAPILINT) run --config .golangci-kal.yml ./api/...

.PHONY: lint-api
lint-api: kubeapilint ## Run kube-api-linter, the Kubernetes API conventions linter, on api/ (config: .golangci-kal.yml).
	$(KUBEAPILINT) run --config .golangci-kal.yml ./api/...

.PHONY: lint-fix
lint-fix: golangci-lint ## Run golangci-lint and apply its fixes.
	$(GOLANGCI_LINT) run --fix ./...

.PHONY: test
test: envtest helm promtool ## Run all tests (-count=1): RACE_PKGS with -race, the rest without, then test-e2e.
	@export KUBEBUILDER_ASSETS="$$($(SETUP_ENVTEST))"; \
	race_pkgs="$$(go list $(RACE_PKGS) 2>/dev/null || true)"; \
	other_pkgs="$$(go list ./... | grep -vxF -e "$$race_pkgs" | grep -v '/test/e2e$$' || true)"; \
	rc=0; \
	if [ -n "$$race_pkgs" ]; then \
		echo "go test -race -count=1 $(TEST_ARGS) $(RACE_PKGS)"; \
		go test -race -count=1 -timeout 30m $(TEST_ARGS) $$race_pkgs || rc=1; \
	fi; \
	if [ -n "$$other_pkgs" ]; then \
		echo "go test -count=1 $(TEST_ARGS) <other packages>"; \
		go test -count=1 -timeout 30m $(TEST_ARGS) $$other_pkgs || rc=1; \
	fi; \
	echo "go test -count=1 -timeout 30m $(E2E_ARGS) ./test/e2e/"; \
	go test -count=1 -timeout 30m $(E2E_ARGS) ./test/e2e/ || rc=1; \
	exit $$rc

.PHONY: test-e2e
test-e2e: envtest ## End-to-end suite on the local dev cluster (test/e2e; part of make test). E2E_ARGS adds flags.
	KUBEBUILDER_ASSETS="$$($(SETUP_ENVTEST))" go test -count=1 -timeout 30m $(E2E_ARGS) ./test/e2e/

.PHONY: test-short
test-short: envtest ## Run all tests with -short and without -race (quick feedback).
	KUBEBUILDER_ASSETS="$$($(SETUP_ENVTEST))" go test -short -count=1 $(TEST_ARGS) ./...

.PHONY: test-readme
test-readme: ## Run the README's laptop commands as written (test/readme; .ci/run runs it after make test).
	README_RUN=1 go test -count=1 -timeout 20m -v -run 'TestReadme|TestEveryReadme' ./test/readme/

.PHONY: test-readme-real
test-readme-real: ## The README's kind quickstart on the real-cluster lane, then the demo (root; hold the lane's lock).
	README_REAL=1 go test -count=1 -timeout 45m -v -run TestReadmeKindQuickstartOnTheRealClusterLane ./test/readme/

.PHONY: verify-generated
verify-generated: manifests generate docs chart monitoring-crds ## Fail if generated code, manifests, the chart or docs/api.md differ from git (use on a clean tree).
	@changes="$$(git status --porcelain --untracked-files=all -- api config docs/api.md dist/chart hack/monitoring-crds)"; \
	if [ -n "$$changes" ]; then \
		echo "Generated files are out of date; run 'make manifests generate docs chart monitoring-crds' and commit:"; \
		echo "$$changes"; git --no-pager diff --stat -- api config docs/api.md dist/chart hack/monitoring-crds; exit 1; \
	fi

## Sub-fields not listed in docs/api.md: embedded Kubernetes types, documented upstream.
CRDDOC_COLLAPSE ?= spec.runner.affinity,spec.runner.resources,spec.runner.topologySpreadConstraints

.PHONY: docs
docs: ## Write docs/api.md (the API field tables) from the CRDs in config/crd/bases.
	go run ./hack/crddoc --crds config/crd/bases --out docs/api.md --collapse $(CRDDOC_COLLAPSE)

##@ Build

.PHONY: build
build: ## Build all packages, and bin/manager, bin/vacuum-runner and bin/kubectl-vacuum (the kubectl plugin).
	go build ./...
	@for cmd in $(CMDS); do \
		echo "go build -o bin/$$cmd ./cmd/$$cmd"; go build -o "$(LOCALBIN)/$$cmd" "./cmd/$$cmd"; \
	done

## engine-server is the one cgo binary (PostgreSQL's own parser through pg_query_go), linked
## static so it runs in the distroless image; manager and vacuum-runner stay cgo-free
## (CGO_ENABLED=0 in image-tar and the Dockerfile). The first build compiles PostgreSQL's
## parser in C (minutes); later builds reuse the Go build cache.
ENGINE_SERVER_TAGS ?= netgo,osusergo

.PHONY: engine-server
engine-server: $(LOCALBIN) ## Build the static cgo binary bin/engine-server.
	CGO_ENABLED=1 go build -trimpath -tags $(ENGINE_SERVER_TAGS) \
		-ldflags "-s -w -linkmode external -extldflags -static" -o $(LOCALBIN)/engine-server ./cmd/engine-server

.PHONY: demo
demo: envtest ## The whole product on the local dev cluster; KEEP=1 keeps it up until Ctrl-C.
	KUBEBUILDER_ASSETS="$$($(SETUP_ENVTEST))" go run ./cmd/demo $(if $(filter-out 0,$(KEEP)),--keep)

.PHONY: clean
clean: ## Remove ./bin and coverage files (the envtest cache in ~/.cache/vacuum-operator stays).
	rm -rf $(LOCALBIN) cover.out coverage.out coverage.html

##@ Dependencies

.PHONY: envtest
envtest: ## Build kube-apiserver, etcd and kubectl for envtest (cold: ~10 min, then instant).
	@$(SETUP_ENVTEST) >/dev/null

.PHONY: controller-gen
controller-gen: $(LOCALBIN) ## Install controller-gen into ./bin.
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: golangci-lint
golangci-lint: $(LOCALBIN) ## Install golangci-lint into ./bin.
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

.PHONY: kubeapilint
kubeapilint: $(KUBEAPILINT) ## Build bin/kubeapilint (golangci-lint with kube-api-linter, hack/kubeapilint).

$(KUBEAPILINT): hack/kubeapilint/go.mod hack/kubeapilint/go.sum hack/kubeapilint/main.go | $(LOCALBIN)
	@grep -q 'golangci/golangci-lint/v2 $(GOLANGCI_LINT_VERSION)$$' hack/kubeapilint/go.mod || \
		{ echo "hack/kubeapilint/go.mod must pin golangci-lint $(GOLANGCI_LINT_VERSION), as GOLANGCI_LINT_VERSION does"; exit 1; }
	cd hack/kubeapilint && go build -o $(KUBEAPILINT) .

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

# go-install-tool installs package $(2) at version $(3) as $(1)-$(3) and points the symlink $(1)
# at it, so bumping a version above reinstalls the tool.
define go-install-tool
@[ -f "$(1)-$(3)" ] && [ "$$(readlink -- "$(1)")" = "$(notdir $(1))-$(3)" ] || { \
	echo "Installing $(2)@$(3)"; \
	rm -f "$(1)"; \
	GOBIN="$(LOCALBIN)" go install "$(2)@$(3)"; \
	mv "$(1)" "$(1)-$(3)"; \
	ln -sf "$(notdir $(1))-$(3)" "$(1)"; \
}
endef

##@ Real cluster (root on Linux: a real kubelet, containerd and runc on this host)

## The operator image, built without Docker (hack/imagetar, go-containerregistry).
IMAGE ?= vacuum-operator:dev
IMAGE_TAR ?= $(LOCALBIN)/vacuum-operator.tar
## Set REALCLUSTER_DIR to move the real cluster's state directory (default /var/tmp/vacuum-realcluster).
E2E_REAL_ARGS ?=

.PHONY: image-tar
image-tar: $(LOCALBIN) engine-server ## Build static bin/manager, bin/vacuum-runner and bin/engine-server and the image tarball bin/vacuum-operator.tar (no Docker).
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(LOCALBIN)/manager ./cmd/manager
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(LOCALBIN)/vacuum-runner ./cmd/vacuum-runner
	go run ./hack/imagetar --tag $(IMAGE) --out $(IMAGE_TAR) \
		--add $(LOCALBIN)/manager=/manager --add $(LOCALBIN)/vacuum-runner=/vacuum-runner \
		--add $(LOCALBIN)/engine-server=/engine-server \
		--user 65532:65532 --entrypoint /manager

## `make deploy`: IMG is the image of the manager and its runner pods (default: what image-tar
## tags); PULL_POLICY its imagePullPolicy; DRY_RUN=server|client changes nothing; KUBECTL picks
## the kubectl (default: kubectl on PATH, else envtest's); WAIT bounds the wait for the rollout.
IMG ?= $(IMAGE)

.PHONY: deploy
deploy: ## Apply config/default (CRDs, RBAC, manager) with image IMG to the current kubeconfig's cluster.
	IMG='$(IMG)' hack/deploy/deploy.sh deploy

.PHONY: undeploy
undeploy: ## Delete what deploy applied, CRDs included (so every VacuumPolicy and VacuumRun too).
	IMG='$(IMG)' hack/deploy/deploy.sh undeploy

.PHONY: docker-build
docker-build: ## Build the image IMG with Docker (needs a Docker engine; image-tar needs none).
	@command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 || { echo "docker-build: no Docker engine reachable ('docker info' fails; Docker does not run on this project's build machines); use 'make image-tar'" >&2; exit 1; }
	docker build -t '$(IMG)' .

.PHONY: test-e2e-real
test-e2e-real: image-tar helm ## E2E suite on a real single-node cluster (root): up, test/e2e-real, always down.
	@rc=0; \
	hack/realcluster/up --image $(IMAGE_TAR) >/dev/null || rc=$$?; \
	if [ $$rc -eq 0 ]; then \
		E2E_REAL=1 KUBECONFIG=$${REALCLUSTER_DIR:-/var/tmp/vacuum-realcluster}/admin.kubeconfig E2E_REAL_IMAGE=$(IMAGE) E2E_REAL_HELM=$(HELM) \
			go test ./test/e2e-real/ -count=1 -timeout 20m -v $(E2E_REAL_ARGS) -ginkgo.v || rc=$$?; \
	fi; \
	REALCLUSTER_SAVE_LOGS=$(LOCALBIN)/realcluster-logs hack/realcluster/down || rc=$${rc/#0/1}; \
	exit $$rc

## The kind lane (hack/kind): kind from the Go module proxy, podman from Debian's packages with a
## private containers.conf, a node image built here without any registry (cached by its inputs
## under ~/.cache/vacuum-operator/kind). KIND_DIR moves its state directory (default /var/tmp/vacuum-kind).
KIND_VERSION ?= v0.33.0
KIND_DIR ?= /var/tmp/vacuum-kind

.PHONY: kind
kind: ## Install kind $(KIND_VERSION) from the Go module proxy into bin/kind.
	@KIND_VERSION=$(KIND_VERSION) bash -c 'source hack/kind/lib.sh && kd_install_kind'

.PHONY: kind-node-image
kind-node-image: ## Build the kind node image without a registry (root; cached by a hash of its inputs); prints its name.
	@KIND_VERSION=$(KIND_VERSION) KIND_STATE=$(KIND_DIR) hack/kind/node-image

.PHONY: test-e2e-kind
## The e2e-real specs that apply to kind (the others read the real lane's host: none today).
E2E_KIND_FOCUS ?= The operator on a real single-node cluster|Services on the real cluster|The Helm chart
test-e2e-kind: image-tar helm ## The kind lane (root): podman, kind, the node image; the README's kind quickstart as written; the e2e-real specs on kind; always down.
	@rc=0; t0=$$(date +%s); export KIND_VERSION=$(KIND_VERSION) KIND_STATE=$(KIND_DIR); \
	hack/kind/up --prepare-only >/dev/null || rc=$$?; t1=$$(date +%s); t2=$$t1; t3=$$t1; \
	if [ $$rc -eq 0 ]; then \
		. $(KIND_DIR)/env && export PATH="$$(hack/setup-k8s-binaries.sh kubectl):$$PATH" && \
		README_KIND=1 go test ./test/readme/ -count=1 -timeout 30m -v -run TestReadmeKindQuickstartOnKind || rc=$$?; \
		t2=$$(date +%s); \
		if [ $$rc -eq 0 ]; then \
			kenv=$$(hack/kind/e2e-env) && eval "$$kenv" && \
			E2E_REAL=1 E2E_REAL_IMAGE=$(IMAGE) E2E_REAL_HELM=$(HELM) go test ./test/e2e-real/ -count=1 -timeout 20m -v \
				-ginkgo.v -ginkgo.focus='$(E2E_KIND_FOCUS)' $(E2E_KIND_ARGS) || rc=$$?; \
		fi; t3=$$(date +%s); \
	fi; \
	KIND_SAVE_LOGS=$(LOCALBIN)/kind-logs hack/kind/down || rc=$${rc/#0/1}; t4=$$(date +%s); \
	echo "test-e2e-kind: up $$((t1 - t0))s, quickstart $$((t2 - t1))s, e2e-real specs $$((t3 - t2))s, down $$((t4 - t3))s"; \
	echo "test-e2e-kind: exit $$rc after $$((t4 - t0))s"; \
	exit $$rc

.PHONY: demo-real
demo-real: image-tar ## The demo on a real single-node cluster (root); KEEP=1 leaves it up (then: hack/realcluster/down).
	@hack/realcluster/up --image $(IMAGE_TAR) >/dev/null
	@rc=0; KUBECONFIG=$${REALCLUSTER_DIR:-/var/tmp/vacuum-realcluster}/admin.kubeconfig \
		hack/realcluster/demo || rc=$$?; \
	if [ -z "$(KEEP)" ]; then hack/realcluster/down || rc=$${rc/#0/1}; \
	else echo "cluster left up: export KUBECONFIG=$${REALCLUSTER_DIR:-/var/tmp/vacuum-realcluster}/admin.kubeconfig; stop it with: sudo hack/realcluster/down"; fi; \
	exit $$rc

##@ Benchmarks

# BENCH_ARGS adds vacbench flags, e.g. make bench BENCH_ARGS=--quick (toy sizes, under a minute).
BENCH_ARGS ?=

.PHONY: bench
bench: ## Measure the field reports with the engine: docs/benchmarks/REPORT.md, CSVs, PNGs (39m7s on 2026-12-07 at 17:32 UTC, experiment 8 7m19s and 10 16m19s with one adaptive run of 184 s; 33m57s at 09:04 UTC that day; the budget is 30 minutes).
	go run ./cmd/vacbench --out docs/benchmarks $(BENCH_ARGS)

##@ Reliability

# SOAK_ARGS adds cmd/soak flags, e.g. make soak SOAK_ARGS='--duration 30m --kills 0 --seed 42'.
SOAK_KILLS ?= 250
SOAK_ARGS ?=

.PHONY: soak
soak: $(LOCALBIN) ## Crash soak: $(SOAK_KILLS) SIGKILLs/power losses of a writer+vacuum child, ledger compared after each (2m14s at load 1, 12m29s at load 30).
	go build -o $(LOCALBIN)/soak ./cmd/soak
	$(LOCALBIN)/soak --kills $(SOAK_KILLS) --quiet $(SOAK_ARGS)

# The gate is strict: reachable vulnerabilities fail it, in modules and in the Go standard
# library alike. VULNCHECK_ALLOW_STDLIB=1 reports standard-library findings without failing.
VULNCHECK_ALLOW_STDLIB ?= 0

.PHONY: vulncheck
vulncheck: ## govulncheck (offline database from golang.org/x/vulndb) through hack/vulngate: fails on reachable vulnerabilities in modules.
	VULNCHECK_ALLOW_STDLIB=$(VULNCHECK_ALLOW_STDLIB) hack/vulncheck.sh

##@ Packaging

HELM ?= $(LOCALBIN)/helm
HELM_VERSION ?= v3.22.0
PROMTOOL ?= promtool
## build-installer writes one file with everything `make deploy` applies, for `kubectl apply -f`.
INSTALLER ?= dist/install.yaml

.PHONY: chart
chart: envtest ## Write the chart's generated templates (dist/chart/templates/generated) from config/.
	go run ./hack/chartsync --kubectl "$$($(SETUP_ENVTEST))/kubectl" --config config/default --out dist/chart/templates/generated

## The monitoring.coreos.com CRDs the ServiceMonitor, PodMonitor and PrometheusRule need, made
## by controller-gen from the prometheus-operator API module at go.mod's version; test/install
## applies them to envtest. Only those three kinds are kept.
MONITORING_CRDS ?= hack/monitoring-crds

.PHONY: monitoring-crds
monitoring-crds: controller-gen ## Generate $(MONITORING_CRDS) from the prometheus-operator API module.
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(CONTROLLER_GEN) crd:crdVersions=v1,maxDescLen=0 \
		paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 output:crd:dir="$$tmp"; \
	mkdir -p $(MONITORING_CRDS); rm -f $(MONITORING_CRDS)/*.yaml; \
	for k in servicemonitors podmonitors prometheusrules; do cp "$$tmp/monitoring.coreos.com_$$k.yaml" $(MONITORING_CRDS)/; done

.PHONY: build-installer
.PHONY: krew-manifest
krew-manifest: ## Build kubectl-vacuum archives per platform into bin/krew/ and write bin/krew/vacuum.yaml (VERSION=vX.Y.Z).
	@test -n "$(VERSION)" || { echo "make krew-manifest VERSION=vX.Y.Z" >&2; exit 2; }
	hack/krew-manifest.sh $(VERSION)

build-installer: envtest ## Write $(INSTALLER): config/default with the manager and runner image IMG, for kubectl apply -f.
	@mkdir -p $(dir $(INSTALLER))
	IMG='$(IMG)' KUBECTL="$$($(SETUP_ENVTEST))/kubectl" hack/deploy/deploy.sh render > $(INSTALLER)

.PHONY: helm
helm: $(LOCALBIN) ## Install helm into ./bin (built from the Go module proxy).
	$(call go-install-tool,$(HELM),helm.sh/helm/v3/cmd/helm,$(HELM_VERSION))

.PHONY: promtool
promtool: ## Install promtool (Debian's prometheus package) when missing; needs root.
	@command -v $(PROMTOOL) >/dev/null 2>&1 || { \
		[ "$$(id -u)" = 0 ] || { echo "promtool missing: apt-get install prometheus (as root)" >&2; exit 1; }; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
