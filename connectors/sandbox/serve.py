"""`python -m connectors.sandbox.serve [flags]`: the sandbox server without the cdrhouse CLI."""

from __future__ import annotations

import sys

from connectors.sandbox.cli import main

if __name__ == "__main__":
    sys.exit(main())
