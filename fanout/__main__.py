import sys

from stacks.runtime_node import use_venv_node

use_venv_node()

from fanout.cli import main  # noqa: E402

sys.exit(main())
