"""Print the counts and the failures of JUnit XML reports, one line each.

container-structure-test prints nothing to the console when it writes a report (`make structure-test
STRUCTURE_REPORT_DIR=DIR`): this puts what failed into the build log too. Exits 1 if a report is missing or
unreadable, else 0: the test run's own exit status is the verdict.

usage: python3 scripts/junit_summary.py REPORT.xml ...
"""

import sys
import xml.etree.ElementTree as ET


def summarize(path: str) -> list[str]:
    root = ET.parse(path).getroot()
    cases = list(root.iter("testcase"))
    failed = [case for case in cases if case.find("failure") is not None or case.find("error") is not None]
    lines = [f"{path}: {len(cases)} tests, {len(failed)} failed"]
    for case in failed:
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        message = " ".join((problem.text or problem.get("message") or "").split())
        lines.append(f"  FAILED {case.get('name')}: {message[:500]}")
    return lines


def main(paths: list[str]) -> int:
    status = 0
    for path in paths:
        try:
            print("\n".join(summarize(path)))
        except (OSError, ET.ParseError) as error:
            print(f"{path}: no readable JUnit report ({error})", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
