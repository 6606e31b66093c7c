#!/usr/bin/env bash
# The docs site (make docs): the modules', plugins' and roles' own documentation rendered by antsibull-docs as
# docs.ansible.com renders a collection, with the project's Markdown pages (README.md, docs/*.md,
# operator/README.md) read by MyST, into build/docs (html/index.html). Needs the collection on
# ANSIBLE_COLLECTIONS_PATH (make collection) and antsibull-docs, Sphinx and myst-parser on PATH
# (requirements-test.txt). Offline: no intersphinx inventory is fetched, so a reference to another project's
# documentation stays plain text. DOCS_STRICT=1 (make test) makes every Sphinx warning an error.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${DOCS_DIR:-$repo/build/docs}"
src="$out/src"
rm -rf "$out"
mkdir -p "$src"
chmod 700 "$src"  # antsibull-docs wants its directories writable by their owner only

antsibull-docs sphinx-init --use-current --fail-on-error --dest-dir "$src" \
  --index-rst-source "$repo/docs/site/index.rst" --project metal3.baremetal --title metal3.baremetal \
  --copyright "Contributors to the metal3.baremetal project" metal3.baremetal >/dev/null
cat >> "$src/conf.py" <<'PY'

# metal3.baremetal (hack/docs.sh): built offline, so no intersphinx; the project's Markdown pages through MyST,
# their links to headings of other pages resolved.
extensions = [name for name in extensions if name != 'sphinx.ext.intersphinx'] + ['myst_parser']
intersphinx_mapping = {}
myst_heading_anchors = 3
# What intersphinx would resolve online - Ansible's own pages and other collections' plugins - stays plain text;
# a reference to this collection's own documentation that leads nowhere is still an error.
nitpick_ignore_regex = [
    ('std:ref', r'action_plugins|common_return_values|ansible_configuration_settings'),
    ('std:ref', r'ansible_collections\.(?!metal3\.baremetal\.).*'),
    ('std:envvar', r'ANSIBLE_.*'),
]
PY

mkdir -p "$src/rst"
chmod og-w "$src/rst"
antsibull-docs --config-file "$src/antsibull-docs.cfg" collection --cleanup everything --fail-on-error \
  --use-current --dest-dir "$src/rst" metal3.baremetal >/dev/null

# The project's pages where their links expect each other (README.md -> docs/ipam.md -> ../operator/README.md),
# with the one file they link that is no page.
project="$src/rst/project"
mkdir -p "$project/docs" "$project/operator" "$project/playbooks/files"
cp "$repo/README.md" "$project/"
cp "$repo"/docs/*.md "$project/docs/"
cp "$repo/operator/README.md" "$project/operator/"
cp "$repo/playbooks/files/demo.metal3.yml" "$project/playbooks/files/"

strict=()
if [[ "${DOCS_STRICT:-0}" == 1 ]]; then strict=(-W --keep-going); fi
sphinx-build -M html "$src/rst" "$out" -c "$src" -q "${strict[@]}"
echo "$out/html/index.html"
