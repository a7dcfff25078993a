"""`python -m planner_cli`: the `planner` command where no console script is installed."""

import sys

from planner_cli.main import main

sys.exit(main())
