"""Lets the test providers import the package from this repository's
python/ folder when it is not installed (CI runs them without pip)."""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
