import sys

from qinglong.cli import main

sys.exit(main())
