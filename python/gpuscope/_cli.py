"""The `gpuscope` command of a pip-installed gpuscope (the wheel's console script; in the wheel
only, python/gpuscope/meson.build).

It execs the gpuscope executable installed with this package (gpuscope.bundle/gpuscope, the
directory above this package's python/), with the same arguments and environment; that
executable finds gpuscope-full, the top module and this package relative to itself.
"""
import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "gpuscope")
    try:
        os.execv(exe, ["gpuscope"] + sys.argv[1:])
    except OSError as e:
        print(f"gpuscope: cannot start {exe}: {e.strerror} (this command comes with the "
              f"gpuscope wheel; reinstall it with pip)", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
