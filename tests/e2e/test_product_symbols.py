"""The product binary carries no test-only code: the helpers that exist for the test build of
the library (#ifdef GS_TEST_BUILD, src/core/testable.h), such as gs_store_test_exec, are absent
from `gpuscope`'s symbol table (nm), while a product function (gs_store_open) is there, so the
check reads a real table. Needs binutils' nm; else one TAP skip line.
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
out = subprocess.run(["nm", BIN], capture_output=True, text=True, timeout=60)
names = set(row.split()[-1] for row in out.stdout.splitlines() if row.strip())
t.ok(out.returncode == 0 and "gs_store_open" in names, "nm reads gpuscope's symbol table",
     detail=out.stderr[-500:])
t.ok("gs_store_test_exec" not in names, "gs_store_test_exec is not in the product")
test_only = sorted(n for n in names if re.match(r"gs_\w*_test_\w*$", n))
t.ok(not test_only, "no gs_*_test_* symbol in the product", detail=test_only[:10])
sys.exit(t.done())
