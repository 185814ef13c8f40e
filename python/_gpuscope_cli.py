"""The `gpuscope` command of a pip-installed gpuscope: the wheel's console script
(pyproject.toml), installed in the wheel only, beside gpuscope.bundle/
(python/gpuscope/meson.build).

It execs the gpuscope executable installed with it (gpuscope.bundle/gpuscope), with the same
arguments and environment; that executable finds gpuscope-full, the top module and the Python
package relative to itself. A module of its own, outside the package: importing gpuscope would
add tens of milliseconds to every command.
"""
import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpuscope.bundle", "gpuscope")
    try:
        os.execv(exe, ["gpuscope"] + sys.argv[1:])
    except OSError as e:
        print(f"gpuscope: cannot start {exe}: {e.strerror} (it comes with the gpuscope wheel; "
              f"reinstall it with pip)", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
