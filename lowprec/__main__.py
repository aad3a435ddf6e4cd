"""``python -m lowprec``: the same command as the ``lowprec`` entry point."""

from .teaching.cli import main

raise SystemExit(main())
