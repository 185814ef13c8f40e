#!/usr/bin/python3
"""Prints the directory under PREFIX where this Python imports packages from (meson.build:
the gpuscope.pth that makes the installed package importable).

Debian's and Ubuntu's /usr/local (their default scheme, posix_local:
/usr/local/lib/python3.X/dist-packages) when PREFIX is that; otherwise the standard layout,
PREFIX/lib/python3.X/site-packages (a virtual environment's own directory when PREFIX is one).
Usage: python-site-dir.py PREFIX
"""
import os
import sys
import sysconfig

prefix = os.path.normpath(sys.argv[1])
default = sysconfig.get_path("purelib", sysconfig.get_default_scheme())
if default.startswith(prefix + "/"):
    print(default)
else:
    print(sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix}))
