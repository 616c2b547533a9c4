"""What needs the full jurybox, asked for where only jurybox-client is installed (#59): the
front's lazy names whose module the client lacks, and an in-process jury of local models, are
an InstallError naming the install command, not ``No module named ...`` at first use.
(tests/integrations/test_client_install.py checks both in a real client-only install; here the
client is simulated: its missing module hidden, its distribution said to be the only one.)"""

from __future__ import annotations

import sys

import pytest

import jurybox
from jurybox.rubrics import errors
from jurybox.rubrics.errors import FULL_INSTALL, InstallError


@pytest.fixture
def client_only(monkeypatch):
    monkeypatch.setattr(errors, "client_only", lambda: True)


def test_a_front_name_the_client_lacks_names_the_full_install(client_only, monkeypatch):
    monkeypatch.delitem(jurybox.__dict__, "judge_file", raising=False)
    monkeypatch.setitem(sys.modules, "jurybox.serving.runs.local", None)  # not installed
    with pytest.raises(InstallError) as raised:
        from jurybox import judge_file  # noqa: F401
    assert str(raised.value).startswith(
        "jurybox.judge_file needs the full jurybox install (module jurybox.serving.runs.local is "
        "not here: this is jurybox-client"
    )
    assert str(raised.value).endswith(FULL_INSTALL) and isinstance(raised.value, ImportError)


def test_a_missing_module_in_the_full_install_is_python_s_own_error(monkeypatch):
    monkeypatch.setattr(errors, "client_only", lambda: False)
    monkeypatch.delitem(jurybox.__dict__, "judge_file", raising=False)
    monkeypatch.setitem(sys.modules, "jurybox.serving.runs.local", None)
    with pytest.raises(ModuleNotFoundError) as raised:
        from jurybox import judge_file  # noqa: F401
    assert not isinstance(raised.value, InstallError)


def test_an_in_process_jury_of_local_models_names_the_full_install(client_only):
    from jurybox.integrations.trl import jury_reward

    with pytest.raises(InstallError) as raised:
        jury_reward(jury="tiny", rubric="mirage-mg")
    assert str(raised.value).startswith(
        "jurybox: an in-process jury (jury=) whose judges run local models (smollm2-135m "
        "(transformers), gemma3-270m (transformers)) needs the full jurybox install"
    )
    assert str(raised.value).endswith(FULL_INSTALL)
