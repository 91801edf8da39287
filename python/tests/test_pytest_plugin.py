"""The pytest plugin, judged through pytest itself (pytester, each session
in a subprocess): a correct kernel passes; a broken one fails with the
shrunk case and the reproduce command, its entry is saved, the next run
replays it and fails before any generated case, the printed seed and case
reproduce it, and after the fix the test passes with the entry still there.

Plain Python kernels (the router of python/examples/test_router_example.py),
small cases (BITPARITY_MAX_TE=256) and few of them: the whole file runs in
CI, in the virtual environment where the wheel is installed.
"""
import glob
import os
import re
import shutil

import pytest

from conftest import INSTALLED, PYTHON_DIR

EXAMPLE = os.path.join(PYTHON_DIR, "examples", "test_router_example.py")
CASES = "30"


@pytest.fixture
def session(pytester, monkeypatch):
    """Runs pytest in a subprocess in pytester's folder, with the plugin
    (installed, or this checkout's) and small cases."""
    monkeypatch.setenv("BITPARITY_MAX_TE", "256")
    if not INSTALLED:
        if not os.environ.get("BITPARITY_BIN"):
            pytest.skip("neither the wheel nor $BITPARITY_BIN: no bitparity CLI to run")
        monkeypatch.setenv("PYTHONPATH", PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def run(*args):
        plugin = () if INSTALLED else ("-p", "bitparity.pytest_plugin")
        return pytester.runpytest_subprocess(*plugin, "-p", "no:cacheprovider", "--bitparity-cases", CASES, *args)
    return run


def example(pytester, fixed=False):
    """The worked example in pytester's folder; ``fixed``: its broken
    kernel's bug removed (the same test names)."""
    text = open(EXAMPLE).read()
    if fixed:
        assert "count_padding=True" in text
        text = text.replace("count_padding=True", "count_padding=False")
    path = pytester.path / "test_router_example.py"
    path.write_text(text)
    return path


def entries(pytester, test):
    return sorted(glob.glob(str(pytester.path / "bitparity-corpus" / "test_router_example" / test / "router" / "*.json")))


def test_a_correct_kernel_passes_and_saves_nothing(pytester, session):
    example(pytester)
    # A fixed seed: CI's verdict on a correct kernel must not vary.
    result = session("-k", "test_router and not padding", "--bitparity-seed", "1")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "bitparity-corpus").exists()


def test_a_broken_kernel_fails_is_saved_replayed_reproduced_and_fixed(pytester, session):
    example(pytester)
    broken = "test_router_example.py::test_router_counting_padding"

    # 1. Generated cases find the bug: the shrunk case, what differs, where
    # it was saved, the command that reproduces it.
    first = session(broken)
    first.assert_outcomes(failed=1)
    out = first.stdout.str()
    assert "FAILED router / padding / exec:bitparity-relay" in out, out
    assert "shrunk to" in out and "counts" in out, out
    saved = entries(pytester, "test_router_counting_padding")
    assert any(os.path.basename(p).startswith("padding-exec-bitparity-relay-") for p in saved), (saved, out)
    for path in saved:
        # "in this test's corpus": the CLI shrank the row's lowest failing
        # case for the report after another thread had saved the same entry.
        assert "saved to %s:" % path in out or "in this test's corpus: %s " % path in out, out
    m = re.search(r"reproduce: BITPARITY_MAX_TE=256 pytest (\S+) --bitparity-seed (\d+) --bitparity-case (\d+)", out)
    assert m and m.group(1) == broken, out
    seed, case = m.group(2), m.group(3)

    # 2. The next run replays the saved entry first and fails on it, before
    # any generated case (no seed of its own to reproduce).
    second = session(broken)
    second.assert_outcomes(failed=1)
    out = second.stdout.str()
    assert "still fails (replayed before any generated case)" in out, out
    assert all(os.path.basename(p) in out for p in saved), out
    assert "--bitparity-seed" not in out, out
    assert entries(pytester, "test_router_counting_padding") == saved

    # 3. The printed seed and case reproduce the failure (corpus set aside,
    # so that the generated case is what fails).
    shutil.move(str(pytester.path / "bitparity-corpus"), str(pytester.path / "set-aside"))
    third = session(broken, "--bitparity-seed", seed, "--bitparity-case", case)
    third.assert_outcomes(failed=1)
    assert "seed %s, case %s" % (seed, case) in third.stdout.str(), third.stdout.str()
    shutil.rmtree(str(pytester.path / "bitparity-corpus"))
    shutil.move(str(pytester.path / "set-aside"), str(pytester.path / "bitparity-corpus"))

    # 4. Fixed, the test passes: the entry replays clean, then the generated
    # cases; the entry stays (it keeps the bug fixed).
    example(pytester, fixed=True)
    fixed = session(broken)
    fixed.assert_outcomes(passed=1)
    assert entries(pytester, "test_router_counting_padding") == saved


def test_any_callable_runs_in_the_test_process(pytester, session):
    # A closure over the test's own state: the calls happen in this
    # process (a child process would leave the counter at 0).
    pytester.makepyfile(test_closure="""
        import os, sys
        sys.path.insert(0, %r)
        from test_router_example import forward, backward

        def test_closure(bitparity):
            calls = []
            def fwd(case):
                calls.append(os.getpid())
                return forward(case)
            bitparity.check("router", fwd, lambda case: backward(case), backend="python", cases=5)
            assert calls and set(calls) == {os.getpid()}
    """ % os.path.dirname(EXAMPLE))
    session("--bitparity-cases", "5").assert_outcomes(passed=1)


def test_an_exception_in_the_kernel_fails_the_test_with_it(pytester, session):
    pytester.makepyfile(test_raises="""
        def test_raises(bitparity):
            def fwd(case):
                raise RuntimeError("kernel exploded on T=%d" % case.t)
            bitparity.check("seqwise_loss", fwd, fwd, backend="python", cases=5)
    """)
    result = session("--bitparity-cases", "5")
    result.assert_outcomes(failed=1)
    assert "RuntimeError: kernel exploded on T=" in result.stdout.str(), result.stdout.str()


def test_a_missing_cli_is_said(pytester, session):
    pytester.makepyfile(test_missing="""
        def test_missing(bitparity):
            bitparity.check("seqwise_loss", lambda c: 0, lambda c: 0)
    """)
    result = session("--bitparity-bin", str(pytester.path / "no-such-bitparity"))
    result.assert_outcomes(failed=1)
    assert "is not an executable file" in result.stdout.str(), result.stdout.str()
