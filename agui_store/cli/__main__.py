"""``python -m agui_store.cli``: the same command line as ``agui-store``."""

import sys

from agui_store.cli import main

sys.exit(main())
