"""``python -m metal3_operator``: run the operator."""
import sys

from metal3_operator.manager import main

sys.exit(main())
