"""``python -m agui_store``: the same command line as ``agui-store``."""

import sys

from agui_store.cli import main

sys.exit(main())
