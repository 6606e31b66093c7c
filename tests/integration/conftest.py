"""Fixtures of the integration tests that more than one module uses."""
from tests.integration.hostclaim_world import management  # noqa: F401  # pylint: disable=unused-import
