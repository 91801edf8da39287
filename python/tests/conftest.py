"""The plugin's own tests (test_pytest_plugin.py) run pytest sessions in
subprocesses (pytester). Where the wheel is installed they use it: the
plugin loads through its pytest11 entry point and the CLI is the wheel's.
From a source checkout they use python/bitparity (``-p``) and the CLI named
by $BITPARITY_BIN (cargo build: target/debug/bitparity)."""
import os
import sys
from importlib.metadata import entry_points

pytest_plugins = ["pytester"]

PYTHON_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
INSTALLED = any(ep.name == "bitparity" for ep in entry_points(group="pytest11"))
if not INSTALLED:
    sys.path.insert(0, PYTHON_DIR)
