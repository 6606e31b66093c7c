# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The module adapter: AnsibleModule around a ModuleSpec."""
from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec, execute


def run_module(spec: ModuleSpec) -> None:
    module = AnsibleModule(argument_spec=spec.argument_spec, supports_check_mode=True,
                           **spec.validation_kwargs())
    result = execute(spec, module.params, module.check_mode)
    if not module._diff:
        result.pop("diff", None)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)
