"""Print pip constraints pinning each runtime dependency to the lowest version pyproject allows.

Read from ``pyproject.toml`` itself, never kept by hand: ``[project] dependencies`` and every
optional extra that ships a feature (not ``test``, ``dev`` or ``docs``), and the references in
``test`` that the package's own code is compared with (``REFERENCES``: the tests compare with
each version's behaviour, so the lowest pass compares with the lowest). A requirement with a
``>=`` bound is pinned to that bound; one without a lower bound is an error, since its lowest
version cannot be tested.

    python .ci/lowest_constraints.py > constraints.txt
    pip install -c constraints.txt -e '.[test]'
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

NOT_FEATURES = {"test", "dev", "docs"}
#: Test requirements that are references, not tools: jsonpatch is what the package's JSON Patch
#: engine and diff are checked against.
REFERENCES = {"jsonpatch"}
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*?)\s*(;.*)?$")


def _name(requirement: str) -> str:
    match = REQUIREMENT.match(requirement)
    return match.group(1).lower() if match else ""


def lowest_pins(pyproject: dict) -> list[str]:
    project = pyproject["project"]
    requirements = list(project.get("dependencies", []))
    for extra, extra_requirements in project.get("optional-dependencies", {}).items():
        if extra not in NOT_FEATURES:
            requirements += extra_requirements
        else:
            requirements += [r for r in extra_requirements if _name(r) in REFERENCES]
    pins: dict[str, str] = {}
    for requirement in requirements:
        match = REQUIREMENT.match(requirement)
        if not match:
            raise SystemExit(f"cannot read the requirement {requirement!r}")
        name, _, spec, marker = match.groups()
        if name.lower().replace("_", "-").startswith("agui-store"):
            continue  # an extra that names another extra of this project
        lower = [v for op, v in re.findall(r"(>=|==|~=)\s*([^,\s]+)", spec)]
        if not lower:
            raise SystemExit(
                f"{requirement!r} has no lower bound: its lowest version is untestable"
            )
        pins[name.lower()] = f"{name}=={lower[0]}" + (marker or "")
    return sorted(pins.values())


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1] / "pyproject.toml"
    print("\n".join(lowest_pins(tomllib.loads(path.read_text(encoding="utf-8")))))


if __name__ == "__main__":
    main()
