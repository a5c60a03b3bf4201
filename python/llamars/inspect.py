"""`python -m llamars.inspect MODEL.gguf`: print a GGUF file's metadata and tensor table."""
import sys

from ._inspect import main

if __name__ == "__main__":
    sys.exit(main())
