#!/usr/bin/python3
"""Prints the directory under PREFIX where this Python imports packages from (meson.build:
the gpuscope.pth that makes the installed package importable).

Debian's and Ubuntu's /usr/local (their default scheme, posix_local:
/usr/local/lib/python3.X/dist-packages) when PREFIX is that; their /usr/lib/python3/dist-packages
(scheme deb_system, where Debian packages put modules: make deb) when PREFIX is /usr; otherwise
the standard layout, PREFIX/lib/python3.X/site-packages (a virtual environment's own directory
when PREFIX is one).
Usage: python-site-dir.py PREFIX
"""
import os
import sys
import sysconfig

prefix = os.path.normpath(sys.argv[1])
schemes = [sysconfig.get_default_scheme()]
if "deb_system" in sysconfig.get_scheme_names():
    schemes.append("deb_system")
for scheme in schemes:
    path = sysconfig.get_path("purelib", scheme)
    # /usr/local/lib/... is under /usr too: the scheme's own prefix must be PREFIX.
    if path.startswith(prefix + "/lib/"):
        print(path)
        break
else:
    print(sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix}))
