"""`hookbus --version`: the installed distribution's version, without loading torch."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest

from hookbus.cli import main


def test_version_prints_the_installed_distributions_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"hookbus {version('hookbus')}\n"


def test_version_is_the_packages_version() -> None:
    import hookbus

    assert version("hookbus") == hookbus.__version__


@pytest.mark.slow
def test_version_runs_as_a_command_without_importing_torch() -> None:
    probe = (
        "import sys\n"
        "from hookbus.cli import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit as exc:\n"
        "    print('exit', exc.code, 'torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == [f"hookbus {version('hookbus')}", "exit 0 False"]
