"""Where `pip install ARGS` will look for packages, as JSON on stdout, by pip's own code: its configuration (pip.conf
files, PIP_* variables) and the requirements files' options (-i, --extra-index-url, --no-index, -f, ${VAR}s), read
exactly as the install will read them, before it runs; no index is asked. Only the places pip will ask: it ignores
a plain-http one that is no trusted host. Also the constraint files pip already has
(PIP_CONSTRAINT or a pip.conf's), which the launcher keeps beside the image's.

usage: python -m sagemaker_mxnet_horovod.act.pip_locations ARGS...   (act/requirements.py, in the code directory,
with the install's environment)

pip's internals, not its API: the image pins pip (docker/constraints-*.txt), and tests/image/test_pip_locations.py
checks this against it.
"""

from __future__ import annotations

import json
import sys


def pip_locations(argv: list[str]) -> dict:
    from pip._internal.commands import create_command
    from pip._internal.models.link import Link

    command = create_command("install")
    options, args = command.parse_args(argv)
    with command.main_context():
        session = command.get_default_session(options)
        finder = command._build_package_finder(options, session)  # noqa: SLF001 - pip's own finder, see above
        command.get_requirements(args, options, finder, session)  # applies the requirements files' options

        def used(urls: list[str]) -> list[str]:
            # pip ignores a plain-http location unless it is a trusted host (or this machine): it never asks it.
            return [url for url in urls if session.is_secure_origin(Link(url))]

        return {"index_urls": used(finder.index_urls), "find_links": used(finder.find_links),
                "no_index": bool(finder.search_scope.no_index), "constraints": list(options.constraints)}


if __name__ == "__main__":
    json.dump(pip_locations(sys.argv[1:]), sys.stdout)
