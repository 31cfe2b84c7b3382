"""The README's first screen tells the truth: its two commands are the ones CI and users run."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def first_screen_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:25]
    return [line.strip() for line in lines if line.startswith("    ") and line.strip()]


def test_the_first_screen_gives_exactly_an_install_and_run_and_an_install_and_test_command() -> (
    None
):
    run, test = first_screen_commands()
    fresh = "python3 -m venv .venv && . .venv/bin/activate && python3 -m pip install"
    assert run.startswith(fresh) and run.endswith("agui-store demo")
    assert test.startswith(fresh) and "pytest" in test


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, test = first_screen_commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test in [line.strip() for line in ci]


def test_the_readme_stays_a_front_door() -> None:
    # What it is, the two commands, a short tour and links: the rest lives in docs/.
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300
