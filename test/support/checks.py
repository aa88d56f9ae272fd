"""The tests' tally: `check(label, ok, detail)` prints `ok   label` or `FAIL label detail`
and counts; `check.summary()` prints the counts and returns the exit status. Standard
library only."""


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

    def summary(self) -> int:
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0
