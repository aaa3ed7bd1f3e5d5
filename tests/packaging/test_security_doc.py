"""docs/security.md names a test beside every defence and bypass attempt;
this keeps the names true: every `test_module.Class[.test_method]` names a
class (and method) of tests/e2e/test_module.py, or of another tests/
directory, and every `Suite.Name` that looks like a GoogleTest name is a
TEST/TEST_F in tests/unit/. A renamed or deleted test fails here."""

import glob
import os
import re
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = os.path.join(ROOT, "docs", "security.md")

PY_NAME = re.compile(r"`(test_[a-z0-9_]+)\.([A-Z][A-Za-z0-9]+)(?:\.(test_[a-z0-9_]+))?`")
GTEST_NAME = re.compile(r"`([A-Z][A-Za-z0-9]+)\.([A-Z][A-Za-z0-9]+)`")


def python_module(name):
    for d in ("e2e", "soak", "apiserver", "packaging"):
        path = os.path.join(ROOT, "tests", d, name + ".py")
        if os.path.exists(path):
            return path
    return None


class SecurityDocNamesRealTests(unittest.TestCase):
    def setUp(self):
        with open(DOC) as f:
            self.doc = f.read()
        self.unit = ""
        for path in glob.glob(os.path.join(ROOT, "tests", "unit", "*.cpp")):
            with open(path) as f:
                self.unit += f.read()

    def test_python_test_names_exist(self):
        names = PY_NAME.findall(self.doc)
        self.assertGreater(len(names), 20)
        for module, cls, method in names:
            with self.subTest(name="%s.%s.%s" % (module, cls, method)):
                path = python_module(module)
                self.assertIsNotNone(path, module)
                with open(path) as f:
                    text = f.read()
                self.assertRegex(text, r"(?m)^class %s\b" % cls)
                if method:
                    # The method is defined in the class or in a mixin it uses.
                    self.assertRegex(text, r"(?m)^    def %s\(" % method)

    def test_googletest_names_exist(self):
        names = GTEST_NAME.findall(self.doc)
        self.assertGreater(len(names), 5)
        for suite, name in names:
            with self.subTest(name="%s.%s" % (suite, name)):
                self.assertRegex(self.unit, r"TEST(?:_F|_P)?\(\s*%s,\s*%s\s*\)" % (suite, name))


if __name__ == "__main__":
    unittest.main()
