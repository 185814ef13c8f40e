"""The product binary carries no test-only code: the helpers that exist for the test build of
the library (#ifdef GS_TEST_BUILD, src/base/testable.h), such as gs_store_test_exec, are absent
from the symbol tables (nm) of `gpuscope` and `gpuscope-full`, while a product function
(gs_sampler_open; gs_store_open in gpuscope-full, which holds the store) is there, so the check
reads real tables. Needs binutils' nm; else one TAP skip line.
"""
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN  # noqa: E402

t = Tap()
if not shutil.which("nm") or not os.path.exists(BIN):
    t.skip("the product binary has no test-only symbols", "needs nm and the gpuscope binary")
    sys.exit(t.done())
FULL = os.path.join(os.path.dirname(BIN), "gpuscope-full")
for path, product_fn in ((BIN, "gs_sampler_open"), (FULL, "gs_store_open")):
    name = os.path.basename(path)
    out = subprocess.run(["nm", path], capture_output=True, text=True, timeout=60)
    names = set(row.split()[-1] for row in out.stdout.splitlines() if row.strip())
    t.ok(out.returncode == 0 and product_fn in names, "nm reads %s's symbol table" % name,
         detail=out.stderr[-500:])
    t.ok("gs_store_test_exec" not in names, "gs_store_test_exec is not in %s" % name)
    test_only = sorted(n for n in names if re.match(r"gs_\w*_test_\w*$", n))
    t.ok(not test_only, "no gs_*_test_* symbol in %s" % name, detail=test_only[:10])
sys.exit(t.done())
