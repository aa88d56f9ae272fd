"""`python -m switchyard.trace`: the moe-eval tool (cli.py)."""
import sys

from .cli import main

sys.exit(main())
