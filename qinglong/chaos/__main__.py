"""`python -m qinglong.chaos …` = `qinglong chaos …`."""

import sys

from qinglong.cli import main

if __name__ == "__main__":
    sys.exit(main(["chaos", *sys.argv[1:]]))
