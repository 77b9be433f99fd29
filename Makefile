# Image URL to use all building/pushing image targets. The tag dev names an image built from source
# (make image-tarballs, make docker-build), as config/ and dist/chart do; no registry has it. A
# release (make release VERSION=vX.Y.Z) pins its version instead (docs/operations.md, "Releasing").
IMG ?= ghcr.io/fencedlock/fencedlock-manager:dev
# The sample workload's image (config/samples/job_ledger.yaml).
WORKER_IMG ?= ghcr.io/fencedlock/ledger-worker:dev
# Set (IfNotPresent, Never) for images loaded into the nodes instead of pulled from a registry.
IMAGE_PULL_POLICY ?=
# What build-installer renders: config/default, or config/cert-manager.
INSTALL_VARIANT ?= config/default
# YEAR defines the year value used for substituting the YEAR placeholder in the boilerplate header.
YEAR ?= 2026

# Get the currently used golang install path (in GOPATH/bin, unless GOBIN is set)
ifeq (,$(shell go env GOBIN))
GOBIN=$(shell go env GOPATH)/bin
else
GOBIN=$(shell go env GOBIN)
endif

# CONTAINER_TOOL defines the container tool to be used for building images.
# Be aware that the target commands are only tested with Docker which is
# scaffolded by default. However, you might want to replace it to use other
# tools. (i.e. podman)
CONTAINER_TOOL ?= docker

# Setting SHELL to bash allows bash commands to be executed by recipes.
# Options are set to exit when a recipe line exits non-zero or a piped command fails.
SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

# The help target prints out all targets with their descriptions organized
# beneath their categories. The categories are represented by '##@' and the
# target descriptions by '##'. The awk command is responsible for reading the
# entire set of makefiles included in this invocation, looking for lines of the
# file as xyz: ## something, and then pretty-format the target and help. Then,
# if there's a line with ##@ something, that gets pretty-printed as a category.
# More info on the usage of ANSI control characters for terminal formatting:
# https://en.wikipedia.org/wiki/ANSI_escape_code#SGR_parameters
# More info on the awk command:
# http://linuxcommand.org/lc3_adv_awk.php

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-15s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate WebhookConfiguration, ClusterRole and CustomResourceDefinition objects.
	"$(CONTROLLER_GEN)" rbac:roleName=manager-role crd webhook paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: controller-gen ## Generate code containing DeepCopy, DeepCopyInto, and DeepCopyObject method implementations.
	"$(CONTROLLER_GEN)" object:headerFile="hack/boilerplate.go.txt",year=$(YEAR) paths="./..."

.PHONY: fmt
fmt: ## Run go fmt against code.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet against code.
	go vet ./...
	go vet -tags e2e ./test/e2e/

# Real kube-apiserver and etcd for envtest, built from the Go module proxy and cached outside the
# clone (setup-envtest cannot download here). See hack/k8s-binaries.sh.
.PHONY: envtest-assets
envtest-assets: ## Build (once) the kube-apiserver and etcd the tests run against.
	@hack/k8s-binaries.sh etcd kube-apiserver >/dev/null

.PHONY: verify
verify: controller-gen kubebuilder kustomize ## Fail if generated files (CRDs, RBAC, webhook config, deepcopy, dist/chart) are stale.
	@CONTROLLER_GEN="$(CONTROLLER_GEN)" KUBEBUILDER="$(KUBEBUILDER)" KUSTOMIZE="$(KUSTOMIZE)" hack/verify-generated.sh

.PHONY: test
test: verify helm-lint vet envtest-assets kustomize ## Run all tests: unit, envtest (real API server), and e2e (real node) when possible.
	# Everything runs under the race detector: the product's packages (concurrent reconciles,
	# shared maps), then the suites under test/, whose manager runs in-process beside the clients
	# (a separate go test, so that the two envtest suites do not share the CPUs).
	KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh)" go test -race $$(go list ./... | grep -v /test/) -count=1 -timeout 20m
	# Except the protocol's model check in full (under -race only its small configurations run,
	# about ten times slower): it prints the states it explored.
	go test ./pkg/lease/ -run 'TestModel$$' -count=1 -v | grep -E 'states|^(ok|FAIL|---)'
	KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh)" go test -race ./test/... -count=1 -timeout 20m
	hack/e2e.sh

.PHONY: test-e2e
test-e2e: ## Run only the end-to-end suite on a real single-node cluster (root, containerd).
	E2E_REQUIRED=1 hack/e2e.sh

.PHONY: stress
stress: ## Long fault-injection campaign on the real node (CHAOS_DURATION, default 10m); prints a summary.
	E2E_REQUIRED=1 CHAOS_DURATION=$${CHAOS_DURATION:-10m} E2E_ARGS="-ginkgo.focus=Fault" hack/e2e.sh

# Each of the two runs writes its tables into docs/benchmarks.md, replacing the sections it measured
# for its etcd mode (BENCH_WRITE_DOC= to only print them; BENCH_ONLY=handover,cycles for a subset).
.PHONY: bench
bench: envtest-assets ## Benchmarks on a real API server; writes docs/benchmarks.md's tables.
	BENCH_WRITE_DOC=$${BENCH_WRITE_DOC-docs/benchmarks.md} KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh)" \
		go test -tags bench ./test/bench/ -run TestBench -count=1 -v -timeout 60m
	@echo "--- the same write paths on an etcd that fsyncs, as production does ---"
	BENCH_FSYNC=1 BENCH_ONLY=$${BENCH_FSYNC_ONLY:-$${BENCH_ONLY:-handover,cycles,joins,fence,pods,semaphore,leader}} \
		BENCH_WRITE_DOC=$${BENCH_WRITE_DOC-docs/benchmarks.md} KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh)" \
		go test -tags bench ./test/bench/ -run TestBench -count=1 -v -timeout 60m

.PHONY: demo
demo: ## Start a local control plane with the operator and show the fence stopping a paused holder.
	hack/demo.sh

.PHONY: demo-down
demo-down: ## Stop what `make demo` started.
	CLUSTER_DIR=/tmp/fencedlock-demo MANAGER_DIR=/tmp/fencedlock-demo/manager KUBECONFIG=/tmp/fencedlock-demo/admin.kubeconfig hack/local-manager.sh stop
	CLUSTER_DIR=/tmp/fencedlock-demo hack/cluster-down.sh

.PHONY: lint
lint: golangci-lint ## Run golangci-lint linter
	"$(GOLANGCI_LINT)" run

.PHONY: lint-fix
lint-fix: golangci-lint ## Run golangci-lint linter and perform fixes
	"$(GOLANGCI_LINT)" run --fix

.PHONY: lint-config
lint-config: golangci-lint ## Verify golangci-lint linter configuration
	"$(GOLANGCI_LINT)" config verify

##@ Build

.PHONY: build
build: manifests generate fmt vet ## Build the manager binary and the sample operator.
	go build -o bin/manager ./cmd/manager
	go build -o bin/fenced-operator ./cmd/fenced-operator

# If you wish to build the manager image targeting other platforms you can use the --platform flag.
# (i.e. docker build --platform linux/arm64). However, you must enable docker buildKit for it.
# More info: https://docs.docker.com/develop/develop-images/build_enhancements/
# Override BASE_IMAGE to build from another registry, e.g.
# make docker-build IMG=<img> BASE_IMAGE=docker.io/library/golang:1.26
.PHONY: docker-build
docker-build: ## Build docker image with the manager.
	$(CONTAINER_TOOL) build $(if $(BASE_IMAGE),--build-arg BASE_IMAGE=$(BASE_IMAGE)) -t ${IMG} .

# No Docker engine or registry needed: static binaries packed by hack/mkimage.sh.
.PHONY: image-tarballs
image-tarballs: ## Build the manager (IMG) and ledger-worker (WORKER_IMG) images as tarballs in bin/images/, without Docker.
	IMG="$(IMG)" WORKER_IMG="$(WORKER_IMG)" hack/image-tarballs.sh bin/images

.PHONY: docker-push
docker-push: ## Push docker image with the manager.
	$(CONTAINER_TOOL) push ${IMG}

# PLATFORMS defines the target platforms for the manager image be built to provide support to multiple
# architectures. (i.e. make docker-buildx IMG=myregistry/mypoperator:0.0.1). To use this option you need to:
# - be able to use docker buildx. More info: https://docs.docker.com/build/buildx/
# - have enabled BuildKit. More info: https://docs.docker.com/develop/develop-images/build_enhancements/
# - be able to push the image to your registry (i.e. if you do not set a valid value via IMG=<myregistry/image:<tag>> then the export will fail)
# To adequately provide solutions that are compatible with multiple platforms, you should consider using this option.
PLATFORMS ?= linux/arm64,linux/amd64,linux/s390x,linux/ppc64le
.PHONY: docker-buildx
docker-buildx: ## Build and push docker image for the manager for cross-platform support
	# copy existing Dockerfile and insert --platform=${BUILDPLATFORM} into Dockerfile.cross, and preserve the original Dockerfile
	sed -e '1 s/\(^FROM\)/FROM --platform=\$$\{BUILDPLATFORM\}/; t' -e ' 1,// s//FROM --platform=\$$\{BUILDPLATFORM\}/' Dockerfile > Dockerfile.cross
	- $(CONTAINER_TOOL) buildx create --name fencedlock-builder
	$(CONTAINER_TOOL) buildx use fencedlock-builder
	- $(CONTAINER_TOOL) buildx build --push --platform=$(PLATFORMS) $(if $(BASE_IMAGE),--build-arg BASE_IMAGE=$(BASE_IMAGE)) --tag ${IMG} -f Dockerfile.cross .
	- $(CONTAINER_TOOL) buildx rm fencedlock-builder
	rm Dockerfile.cross

# Rendered through a throwaway overlay (hack/render-overlay.sh): no tracked file is edited.
.PHONY: build-installer
build-installer: manifests generate kustomize ## Generate dist/install.yaml (INSTALL_VARIANT) for IMG (and IMAGE_PULL_POLICY).
	mkdir -p dist
	KUSTOMIZE="$(KUSTOMIZE)" hack/render-overlay.sh "$(INSTALL_VARIANT)" Deployment "$(IMG)" $(IMAGE_PULL_POLICY) > dist/install.yaml.tmp
	mv dist/install.yaml.tmp dist/install.yaml

# kubebuilder's helm/v2-alpha plugin on the kustomize config (hack/helm-chart.sh); values.yaml,
# Chart.yaml and NOTES.txt are kept. `make verify` fails when dist/chart is stale.
.PHONY: helm-chart
helm-chart: manifests kubebuilder kustomize ## Regenerate the Helm chart dist/chart from config/ (kubebuilder helm/v2-alpha).
	KUBEBUILDER="$(KUBEBUILDER)" KUSTOMIZE="$(KUSTOMIZE)" hack/helm-chart.sh dist/chart

.PHONY: helm-lint
helm-lint: helm ## Lint dist/chart and render it in both certificate modes.
	"$(HELM)" lint --strict dist/chart
	"$(HELM)" template fencedlock dist/chart -n fencedlock-system > /dev/null
	"$(HELM)" template fencedlock dist/chart -n fencedlock-system --set certManager.enabled=true > /dev/null

# Everything a release ships, pinned to VERSION, in dist/release/VERSION (hack/release.sh;
# IMAGE_ARCHES= skips the images). docs/operations.md, "Releasing".
.PHONY: release
release: kustomize helm ## Build release VERSION (make release VERSION=v0.1.0): images, install.yaml, chart, plugin, krew manifest.
	KUSTOMIZE="$(KUSTOMIZE)" HELM="$(HELM)" hack/release.sh "$(VERSION)" "dist/release/$(VERSION)"

.PHONY: build-samples
build-samples: kustomize ## Generate dist/samples.yaml (config/samples: a lock and a Job) for WORKER_IMG (and IMAGE_PULL_POLICY).
	mkdir -p dist
	KUSTOMIZE="$(KUSTOMIZE)" hack/render-overlay.sh config/samples Job "$(WORKER_IMG)" $(IMAGE_PULL_POLICY) > dist/samples.yaml.tmp
	mv dist/samples.yaml.tmp dist/samples.yaml

##@ Deployment

ifndef ignore-not-found
  ignore-not-found = false
endif

.PHONY: install
install: manifests kustomize ## Install CRDs into the K8s cluster specified in ~/.kube/config.
	@out="$$( "$(KUSTOMIZE)" build config/crd 2>/dev/null || true )"; \
	if [ -n "$$out" ]; then echo "$$out" | "$(KUBECTL)" apply -f -; else echo "No CRDs to install; skipping."; fi

.PHONY: uninstall
uninstall: manifests kustomize ## Uninstall CRDs from the K8s cluster specified in ~/.kube/config. Call with ignore-not-found=true to ignore resource not found errors during deletion.
	@out="$$( "$(KUSTOMIZE)" build config/crd 2>/dev/null || true )"; \
	if [ -n "$$out" ]; then echo "$$out" | "$(KUBECTL)" delete --ignore-not-found=$(ignore-not-found) -f -; else echo "No CRDs to delete; skipping."; fi

.PHONY: deploy
deploy: manifests kustomize ## Deploy controller to the K8s cluster specified in ~/.kube/config.
	KUSTOMIZE="$(KUSTOMIZE)" hack/render-overlay.sh "$(INSTALL_VARIANT)" Deployment "$(IMG)" $(IMAGE_PULL_POLICY) | "$(KUBECTL)" apply -f -

.PHONY: undeploy
undeploy: kustomize ## Undeploy controller from the K8s cluster specified in ~/.kube/config. Call with ignore-not-found=true to ignore resource not found errors during deletion.
	"$(KUSTOMIZE)" build "$(INSTALL_VARIANT)" | "$(KUBECTL)" delete --ignore-not-found=$(ignore-not-found) -f -

##@ Dependencies

## Location to install dependencies to
LOCALBIN ?= $(shell pwd)/bin
$(LOCALBIN):
	mkdir -p "$(LOCALBIN)"

## Tool Binaries
KUBECTL ?= kubectl
KUSTOMIZE ?= $(LOCALBIN)/kustomize
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
GOLANGCI_LINT = $(LOCALBIN)/golangci-lint
KUBEBUILDER ?= $(LOCALBIN)/kubebuilder
HELM ?= $(LOCALBIN)/helm

## Tool Versions
KUSTOMIZE_VERSION ?= v5.8.1
CONTROLLER_TOOLS_VERSION ?= v0.23.0


GOLANGCI_LINT_VERSION ?= v2.15.0
# kubebuilder's helm/v2-alpha plugin generates dist/chart (make helm-chart); helm lints, renders
# and installs it in the tests.
KUBEBUILDER_VERSION ?= v4.16.0
HELM_VERSION ?= v4.3.2
.PHONY: kustomize
kustomize: $(KUSTOMIZE) ## Download kustomize locally if necessary.
$(KUSTOMIZE): $(LOCALBIN)
	$(call go-install-tool,$(KUSTOMIZE),sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION))

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Download controller-gen locally if necessary.
$(CONTROLLER_GEN): $(LOCALBIN)
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: kubebuilder
kubebuilder: $(KUBEBUILDER) ## Download kubebuilder locally if necessary.
$(KUBEBUILDER): $(LOCALBIN)
	$(call go-install-tool,$(KUBEBUILDER),sigs.k8s.io/kubebuilder/v4,$(KUBEBUILDER_VERSION))

.PHONY: helm
helm: $(HELM) ## Download helm locally if necessary.
$(HELM): $(LOCALBIN)
	$(call go-install-tool,$(HELM),helm.sh/helm/v4/cmd/helm,$(HELM_VERSION))

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Download golangci-lint locally if necessary.
$(GOLANGCI_LINT): $(LOCALBIN)
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))
	@test -f .custom-gcl.yml && { \
		echo "Building custom golangci-lint with plugins..." && \
		$(GOLANGCI_LINT) custom --destination $(LOCALBIN) --name golangci-lint-custom && \
		mv -f $(LOCALBIN)/golangci-lint-custom $(GOLANGCI_LINT); \
	} || true

# go-install-tool will 'go install' any package with custom target and name of binary, if it doesn't exist
# $1 - target path with name of binary
# $2 - package url which can be installed
# $3 - specific version of package
define go-install-tool
@[ -f "$(1)-$(3)" ] && [ "$$(readlink -- "$(1)" 2>/dev/null)" = "$(1)-$(3)" ] || { \
set -e; \
package=$(2)@$(3) ;\
echo "Downloading $${package}" ;\
rm -f "$(1)" ;\
GOBIN="$(LOCALBIN)" go install $${package} ;\
mv "$(LOCALBIN)/$$(basename "$(1)")" "$(1)-$(3)" ;\
} ;\
ln -sf "$$(realpath "$(1)-$(3)")" "$(1)"
endef

define gomodver
$(shell go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' $(1) 2>/dev/null)
endef
