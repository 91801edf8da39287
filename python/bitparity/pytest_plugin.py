"""bitparity's pytest plugin (registered through the ``pytest11`` entry
point: installing the ``bitparity`` wheel enables it). See docs/pytest.md.

    def test_my_router(bitparity):
        bitparity.check("router", forward=my_fwd, backward=my_bwd, profile=None, cases=300)

``check`` judges the functions with every property of ``bitparity check``
(the functions take and return what ``bitparity.serve`` passes and expects).
They stay in this process: a thread serves the protocol on a Unix socket,
and the CLI's external subject ``exec:bitparity-relay`` is a relay that
copies its stdin and stdout to that socket, so any callable works (a
closure, a lambda, a function defined inside the test).

Each test has its own corpus folder, ``<corpus>/<test file>/<test name>/``
(``<corpus>``: ``--bitparity-corpus DIR``, else ``bitparity-corpus/`` next to
the test file). A failure is shrunk and saved there; every later run of the
test first replays that folder's entries on the functions and fails at
once, before any generated case, while one still fails.

Options: ``--bitparity-cases N`` (overrides ``check``'s ``cases``),
``--bitparity-seed X`` (default: a random seed, printed on failure),
``--bitparity-case I`` (only case I of the seed: a failure's reproduce
command), ``--bitparity-corpus DIR``, ``--bitparity-bin PATH`` (the CLI;
default ``$BITPARITY_BIN``, else the ``bitparity`` installed next to this
Python, else the first on ``PATH``).
"""
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import pytest

from . import _Served
from ._relay import ENV as RELAY_ENV
from ._server import SocketServer

RELAY = "bitparity-relay"
# The subject's name in reports and corpus entries: the same on every run
# and machine (the socket's path travels in the environment).
SUBJECT = "exec:" + RELAY
DEFAULT_CASES = 200
CORPUS = "bitparity-corpus"


def pytest_addoption(parser):
    group = parser.getgroup("bitparity", "bitparity: properties of GPU kernels (the `bitparity` fixture)")
    group.addoption("--bitparity-cases", type=int, metavar="N",
                    help="generated cases per check (overrides check's cases=; default %d)" % DEFAULT_CASES)
    group.addoption("--bitparity-seed", metavar="X",
                    help="seed of the generated cases, decimal or 0x-hex (default: random, printed on failure)")
    group.addoption("--bitparity-case", type=int, metavar="I",
                    help="run only case I of --bitparity-seed (a failure's reproduce command)")
    group.addoption("--bitparity-corpus", metavar="DIR",
                    help="the corpus root: each test's failures are saved to, and replayed from, "
                         "DIR/<test file>/<test name>/ (default: %s/ next to the test file)" % CORPUS)
    group.addoption("--bitparity-bin", metavar="PATH",
                    help="the bitparity CLI (default: $BITPARITY_BIN, else the one installed next to "
                         "this Python, else the first on PATH)")


class _Plugin:
    """Per session: the relay's wrapper, written once."""

    def __init__(self):
        self.bin_dir = None

    def relay_dir(self):
        if self.bin_dir is None:
            folder = tempfile.mkdtemp(prefix="bitparity-relay-")
            relay = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_relay.py")
            path = os.path.join(folder, RELAY)
            with open(path, "w") as f:
                # -I: the relay needs the standard library only, and no
                # PYTHON* variable or user site of the tests may slow or
                # break it.
                f.write("#!/bin/sh\nexec %s -I %s \"$@\"\n" % (shlex.quote(sys.executable), shlex.quote(relay)))
            os.chmod(path, 0o755)
            self.bin_dir = folder
        return self.bin_dir

    def close(self):
        if self.bin_dir is not None:
            shutil.rmtree(self.bin_dir, ignore_errors=True)


def pytest_configure(config):
    plugin = _Plugin()
    config._bitparity = plugin
    config.add_cleanup(plugin.close)


def find_cli(config):
    """The bitparity CLI's path; a clear failure when there is none."""
    explicit = config.getoption("bitparity_bin") or os.environ.get("BITPARITY_BIN")
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return os.path.abspath(explicit)
        pytest.fail("bitparity: the CLI %r (--bitparity-bin or $BITPARITY_BIN) is not an executable file" % explicit,
                    pytrace=False)
    exe = "bitparity.exe" if os.name == "nt" else "bitparity"
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        path = os.path.join(folder, exe)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which("bitparity")
    if found:
        return found
    pytest.fail("bitparity: no `bitparity` CLI next to %s nor on PATH: install the wheel (`pip install bitparity`), "
                "or name a built one with --bitparity-bin PATH or $BITPARITY_BIN (cargo build: "
                "target/debug/bitparity)" % sys.executable, pytrace=False)


def _folder_name(name):
    """A file name for a test's name: readable, and distinct for distinct
    names (a hash is added when characters had to be replaced)."""
    safe = re.sub(r"[^A-Za-z0-9._\[\]-]+", "_", name)
    if safe != name:
        safe += "-" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return safe


def corpus_folder(request):
    """This test's corpus folder (see the module docstring)."""
    config = request.config
    path = str(request.node.path) if hasattr(request.node, "path") else str(request.node.fspath)
    root = config.getoption("bitparity_corpus")
    if root:
        root = os.path.join(str(config.invocation_params.dir), root)
    else:
        root = os.path.join(os.path.dirname(path), CORPUS)
    test_file = os.path.splitext(os.path.basename(path))[0]
    # The node id less its file part: Class::test[params].
    name = request.node.nodeid.split("::", 1)[-1]
    return os.path.join(root, _folder_name(test_file), _folder_name(name))


class Result:
    """A passed check: ``seed``, ``summary`` (the CLI's --json summary, a
    dict; README, "Reading the table"), ``output`` (its table)."""

    def __init__(self, seed, summary, output):
        self.seed, self.summary, self.output = seed, summary, output

    @property
    def cases(self):
        return self.summary.get("cases", 0)


class Bitparity:
    """The ``bitparity`` fixture's object: ``check(op, forward, backward,
    profile=None, ...)``."""

    def __init__(self, request):
        self.request = request
        self.config = request.config

    def check(self, op, forward, backward, profile=None, cases=None, seconds=None, backend="auto", validate=True,
              padding="skip", clamp_tie=None, properties=()):
        """Judges ``forward`` and ``backward`` as a subject of ``op``
        (``bitparity.serve``'s arguments and meanings): first this test's
        corpus entries, then ``cases`` generated cases (``--bitparity-cases``
        overrides it; ``seconds``, a time budget, may end the run sooner) by
        every property, or by ``properties`` (names, as ``bitparity check
        --property``). Fails the test with each failure shrunk, the
        differing values and the command that reproduces it; returns a
        ``Result`` when every judged case passed."""
        served = _Served(op, forward, backward, profile, backend, validate, padding, clamp_tie)
        cli = find_cli(self.config)
        folder = corpus_folder(self.request)
        cases = self.config.getoption("bitparity_cases") or cases or DEFAULT_CASES
        case = self.config.getoption("bitparity_case")
        seed = self.config.getoption("bitparity_seed")
        if case is not None and seed is None:
            pytest.fail("bitparity: --bitparity-case I needs the seed of the run it comes from (--bitparity-seed X)",
                        pytrace=False)
        if seed is None:
            seed = str(random.SystemRandom().getrandbits(63))
        self.request.node.user_properties.append(("bitparity_seed", seed))
        with SocketServer(served) as server:
            env = dict(os.environ)
            env[RELAY_ENV] = server.path
            env["PATH"] = self.config._bitparity.relay_dir() + os.pathsep + env.get("PATH", "")
            self._replay(cli, op, folder, env)
            summary_path = os.path.join(server.folder, "summary.json")
            args = [cli, "check", "--op", op, "--subject", SUBJECT, "--seed", seed, "--json", summary_path,
                    "--corpus", folder, "--quiet"]
            if case is not None:
                args += ["--case", str(case)]
            else:
                args += ["--cases", str(cases)]
                if seconds is not None:
                    args += ["--seconds", str(seconds)]
            for p in properties:
                args += ["--property", p]
            done = _run(args, env)
            summary = None
            if os.path.exists(summary_path):
                with open(summary_path) as f:
                    summary = json.load(f)
        output = done.stdout + done.stderr
        if done.returncode == 0 and summary is not None:
            return Result(seed, summary, output)
        if done.returncode == 1 and summary is not None and _failures(summary):
            pytest.fail(self._failure_text(op, summary, seed, cases, case), pytrace=False)
        what = {2: "a usage or input error", 3: "nothing was judged (or the subject could not run)",
                130: "interrupted"}.get(done.returncode, "exit code %s" % done.returncode)
        pytest.fail("bitparity check of %s on this test's functions: %s\n\n%s\n$ %s" % (
            op, what, _tail(output), " ".join(shlex.quote(a) for a in args)), pytrace=False)

    def _replay(self, cli, op, folder, env):
        """Replays this test's corpus entries of op, if any: fails the test
        when one still fails."""
        op_folder = os.path.join(folder, op)
        if not os.path.isdir(op_folder) or not any(n.endswith(".json") for n in os.listdir(op_folder)):
            return
        args = [cli, "replay", op_folder, "--subject", SUBJECT]
        done = _run(args, env)
        output = done.stdout + done.stderr
        if done.returncode == 0:
            return
        if done.returncode == 3:
            # Every entry was judged by nothing here: a property that no
            # longer applies (a profile claim dropped, say). The generated
            # cases still run; the test says so.
            self.request.node.warn(pytest.PytestWarning(
                "bitparity: no entry of %s was judged on this test's functions:\n%s" % (op_folder, _tail(output))))
            return
        if done.returncode != 1:
            pytest.fail("bitparity replay of this test's corpus %s could not run (exit %s):\n%s\n$ %s" % (
                op_folder, done.returncode, _tail(output), " ".join(shlex.quote(a) for a in args)), pytrace=False)
        pytest.fail(
            "bitparity: this test's corpus %s still fails (replayed before any generated case):\n%s\n"
            "reproduce: %s\n(a fixed kernel passes these entries; keep them: they keep the bug fixed)" % (
                op_folder, _failed_entries(output) or _tail(output), _pytest_command(self.request, {})),
            pytrace=False)

    def _failure_text(self, op, summary, seed, cases, case):
        knobs = summary.get("knobs") or {}
        out = ["bitparity check of %s on this test's functions failed (seed %s, %s):" % (
            op, seed, "case %s" % case if case is not None else "%s cases" % cases)]
        for f in _failures(summary):
            at = "case %s " % f["case_index"] if f.get("case_index") is not None else ""
            out.append("")
            out.append("FAILED %s / %s / %s (profile %s): %s(%s), shrunk to %s" % (
                f["op"], f["property"], f["subject"], f["profile"], at, f["original_shape"], f["shrunk_shape"]))
            out.append("  " + f["message"])
            out.extend("  | " + line for line in f["shrunk_case"].splitlines())
            out.append("  " + _save_text(f.get("save")))
            if f.get("case_index") is not None:
                options = {"--bitparity-seed": str(summary.get("seed", seed)),
                           "--bitparity-case": str(f["case_index"])}
                out.append("  reproduce: " + _pytest_command(self.request, options, knobs))
        return "\n".join(out)


def _failed_entries(replay_output):
    """The entries of `bitparity replay`'s output that failed, each with its
    indented lines (which subject failed, how)."""
    blocks, keep = [], False
    for line in replay_output.splitlines():
        if line and not line[0].isspace():
            keep = line.startswith(("FAIL", "BAD"))
        if keep:
            blocks.append(line)
    return "\n".join(blocks)


def _failures(summary):
    return [f for o in summary.get("ops", []) for f in o.get("failures", [])]


def _save_text(save):
    """The CLI's SaveNote (tagged by "outcome") in words."""
    save = save if isinstance(save, dict) else {}
    outcome, path = save.get("outcome"), save.get("path")
    if outcome in ("saved", "repaired"):
        return "saved to %s: this test replays it first from now on (commit it)" % path
    if outcome == "known":
        return "in this test's corpus: %s (replayed first from now on)" % path
    return "not saved: %s" % save.get("reason", "(no reason given)")


def _pytest_command(request, options, knobs=None):
    words = ["%s=%s" % (k, shlex.quote(str(v))) for k, v in sorted((knobs or {}).items())]
    words += ["pytest", shlex.quote(request.node.nodeid)]
    for k, v in options.items():
        words += [k, shlex.quote(v)]
    return " ".join(words)


def _run(args, env):
    try:
        return subprocess.run(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)
    except OSError as e:
        pytest.fail("bitparity: cannot run %s: %s" % (args[0], e), pytrace=False)


def _tail(text, lines=40):
    rows = text.rstrip().splitlines()
    return "\n".join(rows[-lines:])


@pytest.fixture
def bitparity(request):
    """Judges Python kernels with bitparity: ``bitparity.check(op, forward,
    backward, profile=None, cases=...)`` (docs/pytest.md)."""
    return Bitparity(request)
