"""Run packer from a checkout without installing it: ``python cli.py --help``."""
from packer.cli import main

if __name__ == "__main__":
    main()
