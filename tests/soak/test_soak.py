"""The soak's own checks (tests/soak/soak.py), without a server: the churn timeline says "certainly
untrusted" only when it is, and --doc replaces the figures between the markers.
    /usr/bin/python3 -m unittest discover -s tests/soak -p 'test_*.py'
"""

import os
import tempfile
import unittest

import soak


class TimelineTest(unittest.TestCase):

    def test_certainly_untrusted_only_outside_every_possible_trusted_moment(self):
        t = soak.Timeline(["c"])
        self.assertTrue(t.certainly_untrusted("c", 0, 100))  # absent from the start
        trusted = t.begin("c", "trusted")
        # In flight: the write may have landed already, and nothing says when trust ends.
        self.assertFalse(t.certainly_untrusted("c", trusted[0] + 1000, trusted[0] + 2000))
        t.end(trusted)
        untrusted = t.begin("c", "untrusted")
        self.assertFalse(t.certainly_untrusted("c", untrusted[0], untrusted[0] + 1))  # in flight
        t.end(untrusted)
        # Trusted up to (at most) the end of the untrusted write, certainly not after it.
        self.assertFalse(t.certainly_untrusted("c", untrusted[1] - 1e-6, untrusted[1] + 10))
        self.assertTrue(t.certainly_untrusted("c", untrusted[1] + 1e-3, untrusted[1] + 10))
        self.assertTrue(t.ever_trusted_before("c", trusted[0]))
        self.assertFalse(t.ever_trusted_before("c", trusted[0] - 1))

    def test_a_write_that_never_returned_keeps_the_previous_trust_possible(self):
        t = soak.Timeline(["c"])
        t.end(t.begin("c", "trusted"))
        t.begin("c", "untrusted")  # failed: never ended
        t.end(t.begin("c", "absent"))
        self.assertFalse(t.certainly_untrusted("c", 1e9, 1e9 + 1))


class DocTest(unittest.TestCase):

    def test_figures_replace_what_is_between_the_markers(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "security.md")
            with open(path, "w") as f:
                f.write("# S\n\n## Soak\n\ntext\n\n%s\nold\n%s\n\n## Next\n\nkept\n" % (soak.BEGIN_MARK, soak.END_MARK))
            soak.write_doc(path, "| a | 1 |\n")
            soak.write_doc(path, "| b | 2 |\n")
            with open(path) as f:
                doc = f.read()
            self.assertEqual(doc, "# S\n\n## Soak\n\ntext\n\n%s\n| b | 2 |\n%s\n\n## Next\n\nkept\n"
                             % (soak.BEGIN_MARK, soak.END_MARK))

    def test_markers_are_added_to_the_soak_section_once(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "security.md")
            with open(path, "w") as f:
                f.write("## Soak\n\n(to be written)\n\n## Next\n")
            soak.write_doc(path, "x\n")
            soak.write_doc(path, "y\n")
            with open(path) as f:
                doc = f.read()
            self.assertEqual(doc.count(soak.BEGIN_MARK), 1)
            self.assertIn(soak.BEGIN_MARK + "\ny\n" + soak.END_MARK + "\n\n## Next\n", doc)
            self.assertNotIn("to be written", doc)


class DurationTest(unittest.TestCase):

    def test_durations(self):
        self.assertEqual(soak.parse_duration("30m"), 1800)
        self.assertEqual(soak.parse_duration("90s"), 90)
        self.assertEqual(soak.parse_duration("1h"), 3600)
        with self.assertRaises(Exception):
            soak.parse_duration("soon")


if __name__ == "__main__":
    unittest.main()
