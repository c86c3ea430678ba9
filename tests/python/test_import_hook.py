"""gpuutil._import_hook: runs a function right before and right after a
module's own code runs when the program imports it (how the CUPTI collector
lets go of its subscription while torch imports and installs the
torch.profiler guard after), without ever importing the module itself."""

import sys

import pytest

from gpuutil._import_hook import after_import


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    events = []
    monkeypatch.setattr(sys, "_gpuutil_import_events", events, raising=False)
    yield tmp_path, events
    for name in [n for n in sys.modules if n.startswith("gpuutil_probe_mod")]:
        del sys.modules[name]


def _write(path, name, body="import sys; sys._gpuutil_import_events.append('module')\n"):
    (path / f"{name}.py").write_text(body)


def test_before_runs_before_the_modules_code_and_then_after_it(module_dir):
    path, events = module_dir
    _write(path, "gpuutil_probe_mod_a")
    hook = after_import("gpuutil_probe_mod_a", lambda: events.append("then"), before=lambda: events.append("before"))
    assert hook in sys.meta_path
    assert events == [], "nothing runs before the program imports the module"
    import gpuutil_probe_mod_a  # noqa: F401

    assert events == ["before", "module", "then"]
    assert hook not in sys.meta_path, "the entry takes itself out once it fired"


def test_an_already_imported_module_runs_then_at_once_and_never_before(module_dir):
    path, events = module_dir
    _write(path, "gpuutil_probe_mod_b")
    import gpuutil_probe_mod_b  # noqa: F401

    events.clear()
    hook = after_import("gpuutil_probe_mod_b", lambda: events.append("then"), before=lambda: events.append("before"))
    assert events == ["then"]
    assert hook not in sys.meta_path


def test_remove_cancels_both(module_dir):
    path, events = module_dir
    _write(path, "gpuutil_probe_mod_c")
    hook = after_import("gpuutil_probe_mod_c", lambda: events.append("then"), before=lambda: events.append("before"))
    hook.remove()
    import gpuutil_probe_mod_c  # noqa: F401

    assert events == ["module"]
    assert hook not in sys.meta_path


def test_a_failing_before_never_fails_the_import_and_then_still_runs(module_dir):
    path, events = module_dir
    _write(path, "gpuutil_probe_mod_d")

    def before():
        raise RuntimeError("boom")

    after_import("gpuutil_probe_mod_d", lambda: events.append("then"), before=before)
    import gpuutil_probe_mod_d  # noqa: F401

    assert events == ["module", "then"]


def test_a_module_whose_code_fails_still_gets_then_after_before(module_dir):
    # (the collector took its subscription back even if torch's import fails)
    path, events = module_dir
    _write(path, "gpuutil_probe_mod_e", "raise ImportError('broken install')\n")
    after_import("gpuutil_probe_mod_e", lambda: events.append("then"), before=lambda: events.append("before"))
    with pytest.raises(ImportError, match="broken install"):
        import gpuutil_probe_mod_e  # noqa: F401
    assert events == ["before", "then"]


def test_submodules_of_the_module_do_not_fire_it(module_dir):
    path, events = module_dir
    pkg = path / "gpuutil_probe_mod_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import sys; sys._gpuutil_import_events.append('pkg')\nfrom . import sub\n")
    (pkg / "sub.py").write_text("import sys; sys._gpuutil_import_events.append('sub')\n")
    after_import("gpuutil_probe_mod_pkg", lambda: events.append("then"), before=lambda: events.append("before"))
    import gpuutil_probe_mod_pkg  # noqa: F401

    assert events == ["before", "pkg", "sub", "then"]
