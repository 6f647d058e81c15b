"""The launch layer is driven through the ``dbpa`` command as the CLI tests drive it."""

from tests.cli.conftest import _key_and_cwd, wide_console  # noqa: F401 (fixtures)
from tests.pipeline.conftest import provider, write_config  # noqa: F401 (fixtures)
