"""``python -m lowprec``: the same command as the ``lowprec`` entry point."""

from .cli import main

raise SystemExit(main())
