"""A minimal TAP producer for the end-to-end tests (stdlib only).

    t = Tap()
    t.ok(cond, "description", detail="shown on failure")
    t.eq(got, want, "description")
    sys.exit(t.done())

Prints 'ok N - desc' / 'not ok N - desc' as each check runs and the plan '1..N' at the end;
done() returns the exit status (1 if anything failed).

Importing it also makes every process the test starts die with the test (gsenv's process
hygiene), so no test can start processes without it.
"""
import sys

import gsenv  # noqa: F401


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, desc, detail=None):
        self.n += 1
        if cond:
            print(f"ok {self.n} - {desc}", flush=True)
        else:
            self.failed += 1
            print(f"not ok {self.n} - {desc}", flush=True)
            if detail is not None:
                for line in str(detail).splitlines() or [""]:
                    print(f"#   {line}", flush=True)
        return bool(cond)

    def eq(self, got, want, desc):
        return self.ok(got == want, desc, detail=f"got:  {got!r}\nwant: {want!r}")

    def skip(self, desc, why):
        self.n += 1
        print(f"ok {self.n} - {desc} # SKIP {why}", flush=True)

    def done(self):
        print(f"1..{self.n}", flush=True)
        return 1 if self.failed else 0
