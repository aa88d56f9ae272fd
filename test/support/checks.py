"""The tests' tally: `check(label, ok, detail)` prints `ok   label` or `FAIL label detail`
and counts; `check.run(label, fn)` checks that fn() returns (its value is the detail);
`check.summary()` prints the counts and returns the exit status (`check.run_all(pairs)`:
run() on each (label, fn), then summary()). Standard library only."""


class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def __call__(self, label, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"ok   {label}")
        else:
            self.failed += 1
            print(f"FAIL {label} {detail}")
        return bool(ok)

    def run(self, label, fn):
        """Calls fn(): passes with its return value as the detail, fails on any
        exception (assertions included), naming it."""
        try:
            detail = fn()
        except Exception as e:  # noqa: BLE001 - report every check
            return self(label, False, f"{type(e).__name__}: {e}")
        if detail is None:
            return self(label, True)
        self.passed += 1
        print(f"ok   {label}: {detail}")
        return True

    def run_all(self, checks) -> int:
        """Runs every (label, fn) of `checks` with run(), then returns summary()."""
        for label, fn in checks:
            self.run(label, fn)
        return self.summary()

    def summary(self) -> int:
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0
