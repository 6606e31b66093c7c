# metal3.baremetal — the two commands: `make test` and `make demo`.
# Everything installs under the repo (.venv, build/) or the user cache (kube binaries).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
COLLECTIONS := build/collections
COLLECTION := $(COLLECTIONS)/ansible_collections/metal3/baremetal
CLUSTER_DIR ?= build/cluster
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/$(COLLECTIONS)
export PATH := $(CURDIR)/$(BIN):$(PATH)
# The operator's package (operator/metal3_operator), for the operator, its tests and the cluster harness.
export PYTHONPATH := $(CURDIR)/operator$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: all venv collection generate kube-binaries test unit store integration sanity lint changelog \
        cluster cluster-down clean demo demo-clean molecule operator docs ansible-lint galaxy-import

all: test

$(BIN)/.installed: requirements.txt requirements-test.txt operator/requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-test.txt
	touch $@

venv: $(BIN)/.installed

# The repo itself, seen as the installed collection metal3.baremetal.
$(COLLECTION):
	mkdir -p $(dir $(COLLECTION))
	ln -sfn ../../../.. $(COLLECTION)

collection: $(COLLECTION)

generate: venv collection
	$(BIN)/python hack/gen-crds.py

kube-binaries:
	bash hack/kube-binaries.sh >/dev/null

# The real Ansible Operator, built with Go once per machine: the operator's tests run the roles under it too.
.PHONY: ansible-operator
ansible-operator:
	bash hack/ansible-operator.sh >/dev/null

# Cluster API's controllers (core, kubeadm bootstrap, kubeadm control plane) with their CRDs and webhook manifests,
# built with Go once per machine: the operator's tests run under them (issue 32).
.PHONY: cluster-api
cluster-api:
	bash hack/cluster-api.sh >/dev/null

# Debian's cloud-init, unpacked into the user cache: the tests read every rendered network_data with it.
.PHONY: cloud-init
cloud-init:
	bash hack/cloud-init.sh >/dev/null

# Debian's nftables, installed as root if nft is missing: the tests check every rendered firewall rule set with it.
.PHONY: nftables
nftables:
	bash hack/nftables.sh >/dev/null

# The virtual lab's images (agent ramdisk and ISO, Debian cloud image), built as root once per machine.
.PHONY: lab-images
lab-images:
	bash hack/lab-images.sh >/dev/null

# Every test: unit, store (both backends), integration (ansible-playbook), sanity, lint, the docs site. The checks
# after pytest are independent of one another and mostly single-threaded: three at a time, each one's output
# printed whole when it ends (8.6 min on two cores for the 13 min of CPU they use).
test: venv collection kube-binaries cloud-init ansible-operator cluster-api nftables
	$(BIN)/python hack/gen-crds.py --check
	$(BIN)/python -m pytest -n 2 --dist loadgroup --durations=25 tests
	$(MAKE) --no-print-directory -j3 --output-sync=target molecule lint sanity ansible-lint galaxy-import docs DOCS_STRICT=1

# One scenario per role, on localhost (delegated driver), each with a throwaway store.
molecule: venv collection
	cd extensions && MOLECULE_PYTHON=$(CURDIR)/$(BIN)/python $(CURDIR)/$(BIN)/molecule test --all

unit: venv collection
	$(BIN)/python -m pytest tests/unit

# The docs site, into build/docs (html/index.html): the modules', plugins' and roles' own documentation rendered by
# antsibull-docs as docs.ansible.com renders a collection, with README.md, docs/ and operator/README.md
# (hack/docs.sh). Offline; DOCS_STRICT=1 (as make test runs it) makes every warning an error.
DOCS_STRICT ?= 0
docs: venv collection
	DOCS_STRICT=$(DOCS_STRICT) bash hack/docs.sh

# mypy reads its settings from pyproject.toml ([tool.mypy]: strict). It checks the engine as the installed
# collection sees it, hence from build/collections; the operator, which imports it from there, from here.
lint: venv collection
	$(BIN)/ruff check --output-format concise .
	cd $(COLLECTIONS) && $(CURDIR)/$(BIN)/mypy -p ansible_collections.metal3.baremetal.plugins.module_utils
	$(BIN)/mypy -p metal3_operator
	$(BIN)/antsibull-changelog lint

# ansible-lint with the production profile, as Galaxy and Automation Hub run it: over roles, playbooks, extensions
# (molecule), examples and meta. What it looks at and the rules skipped where they are wrong for this collection,
# each with its reason: .ansible-lint, .ansible-lint-ignore and inline noqa comments.
ansible-lint: venv collection
	$(BIN)/ansible-lint --nocolor

# galaxy-importer, the checks Galaxy and Automation Hub run on an uploaded collection, on the tarball
# `ansible-galaxy collection build` makes: metadata (galaxy.yml, meta/runtime.yml, Automation Hub's required
# tags), every plugin's documentation through ansible-doc, the roles' READMEs, the changelog, the execution
# environment's files. Configured by its environment variables (GALAXY_IMPORTER_*, which win over any
# galaxy-importer.cfg) to run here, with no container engine: its ansible-test step is off (it runs ansible-test
# sanity in a container; `make sanity` runs it locally), and so is its ansible-lint step, which `make ansible-lint`
# runs over the same content with the same profile (the importer's gives up after 180 s of wall time, which a busy
# 2-core machine exceeds, and would lint a second time). The importer exits 0 on warnings: here any line it logs as
# a WARNING or an ERROR fails the target (its log is build/galaxy/importer.log).
GALAXY_DIR := build/galaxy
GALAXY_IMPORTER_ENV := GALAXY_IMPORTER_RUN_ANSIBLE_TEST=false GALAXY_IMPORTER_ANSIBLE_TEST_LOCAL_IMAGE=false \
  GALAXY_IMPORTER_LOCAL_IMAGE_DOCKER=false GALAXY_IMPORTER_RUN_ANSIBLE_LINT=false \
  GALAXY_IMPORTER_CHECK_REQUIRED_TAGS=true GALAXY_IMPORTER_RUN_ANSIBLE_DOC=true GALAXY_IMPORTER_CHECK_CHANGELOG=true \
  GALAXY_IMPORTER_TMP_ROOT_DIR=$(CURDIR)/$(GALAXY_DIR)/tmp GALAXY_IMPORTER_ANSIBLE_LOCAL_TMP=$(CURDIR)/$(GALAXY_DIR)/tmp
galaxy-import: venv
	rm -rf $(GALAXY_DIR) && mkdir -p $(GALAXY_DIR)/tmp
	$(BIN)/ansible-galaxy collection build --output-path $(GALAXY_DIR) .
	@cd $(GALAXY_DIR) && status=0 && \
	  env $(GALAXY_IMPORTER_ENV) $(CURDIR)/$(BIN)/python -m galaxy_importer.main metal3-baremetal-*.tar.gz \
	    > importer.log || status=$$?; \
	  cat importer.log; \
	  if [ $$status != 0 ] || grep -q -E '^(WARNING|ERROR)' importer.log; then \
	    echo "galaxy-importer refused the collection or warned (build/galaxy/importer.log)"; exit 1; fi

# ansible-test wants the collection at a real ansible_collections/metal3/baremetal path, outside this
# repo's ignored build/ (it lists content with git): a throwaway copy of the tracked and new files.
# ansible-test cannot fetch its own pip bootstrap here, so its requirements live in a venv of their own.
SANITY_VENV := .venv-sanity
$(SANITY_VENV)/.installed: requirements.txt
	test -x $(SANITY_VENV)/bin/python || $(PYTHON) -m venv $(SANITY_VENV)
	$(SANITY_VENV)/bin/pip install -q --disable-pip-version-check $$(grep ^ansible-core requirements.txt)
	cat $(SANITY_VENV)/lib/python3*/site-packages/ansible_test/_data/requirements/sanity.*.txt | \
	  grep -v '^#' | sort -u > $(SANITY_VENV)/requirements.txt
	$(SANITY_VENV)/bin/pip install -q --disable-pip-version-check -r $(SANITY_VENV)/requirements.txt
	touch $@

# The pip version ansible-test 2.19 bootstraps into each of its sanity virtualenvs.
ANSIBLE_TEST_PIP := 24_2
sanity: $(SANITY_VENV)/.installed
	@set -e; mkdir -p ~/.ansible/test/cache; \
	  cp hack/ansible-test-get-pip.py ~/.ansible/test/cache/get_pip_$(ANSIBLE_TEST_PIP).py; \
	  dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	  target="$$dir/ansible_collections/metal3/baremetal"; mkdir -p "$$target"; \
	  git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} cp --parents {} "$$target/"; \
	  cd "$$target" && git init -q && git add -A && \
	  $(CURDIR)/$(SANITY_VENV)/bin/ansible-test sanity --local --python 3.11 --color no

# The main job, on the embedded default store (~/.local/share/metal3-baremetal/store.db).
PLAYBOOK_ENV := ANSIBLE_PYTHON_INTERPRETER=$(CURDIR)/$(BIN)/python ANSIBLE_CALLBACK_RESULT_FORMAT=yaml \
  ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false
demo: venv collection
	$(PLAYBOOK_ENV) $(BIN)/ansible-playbook playbooks/demo.yml

demo-clean: venv collection
	$(PLAYBOOK_ENV) $(BIN)/ansible-playbook playbooks/demo.yml -e demo_state=absent

# A lab of KVM virtual servers with Redfish and IPMI BMCs, DHCP and TFTP, all in the network namespace
# metal3-lab (roles/virtual_lab); as root. `make lab-down` removes it.
.PHONY: lab lab-down
lab: venv collection
	$(PLAYBOOK_ENV) $(BIN)/ansible-playbook playbooks/lab.yml

lab-down: venv collection
	$(PLAYBOOK_ENV) $(BIN)/ansible-playbook playbooks/lab.yml -e virtual_lab_state=absent

# The demo on the lab's virtual servers, which boot: Ironic, the hosts and the cluster inside the lab's
# namespace (playbooks/lab-demo.yml); `make lab-demo-clean` deprovisions and deletes them, `make lab-down` after.
.PHONY: lab-demo lab-demo-clean
lab-demo: lab-images lab
	ip netns exec metal3-lab env $(PLAYBOOK_ENV) $(BIN)/ansible-playbook playbooks/lab-demo.yml \
	  -e lab_images_dir=$$(bash hack/lab-images.sh)

lab-demo-clean: venv collection
	ip netns exec metal3-lab env $(PLAYBOOK_ENV) $(BIN)/ansible-playbook playbooks/lab-demo.yml -e lab_state=absent

# The lab test at its full size (tests/integration/test_lab_provisioning.py with METAL3_LAB_FULL=1): the demo's IPMI
# server (PXE, legacy BIOS) beside its virtual-media one, its cluster hybrid (two workers on libvirt VMs) and a
# metal-stack firewall on a third server. make test runs the same test on the virtual-media server only: five
# guests under emulation take over an hour on two busy cores.
.PHONY: lab-test-full
lab-test-full: venv collection kube-binaries cloud-init nftables
	METAL3_LAB_FULL=1 $(BIN)/python -m pytest tests/integration/test_lab_provisioning.py

cluster: venv collection kube-binaries
	$(BIN)/python -m tests.harness.cluster up --dir $(CLUSTER_DIR)

cluster-down: venv
	$(BIN)/python -m tests.harness.cluster down --dir $(CLUSTER_DIR)

# The operator, against the cluster KUBECONFIG names (`make cluster` starts a local one), CRDs installed first.
# OPERATOR_ARGS adds flags, e.g. OPERATOR_ARGS=--leader-elect.
operator: venv collection
	$(BIN)/python -m metal3_operator.crds config/crd/*.yaml
	$(BIN)/python -m metal3_operator --watches-file operator/watches.yaml $(OPERATOR_ARGS)

clean:
	rm -rf build .pytest_cache .ruff_cache
