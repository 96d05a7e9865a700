"""``python -m herdsim``: the command line."""

from herdsim.cli import main

main()
