"""The repository stands on its own: nothing in it cites a document that is
not in it, and every citation of an in-repo document resolves.

- No tracked file names the product design kept outside the repository (its
  file name, or the shared directory beside the checkout): code, tests and
  docs cite docs/architecture.md, docs/security.md, docs/operations.md or a
  record in docs/decisions/.
- A citation by heading, `docs/<name>.md, "Heading"` (in any file; in code the
  quoted heading may be on the next comment line), names a heading of it, or
  the bold lead of one of its paragraphs (`**Heading.**`).
- A relative Markdown link points to a file of the repository, and its
  `#anchor`, if any, to a heading of that file (GitHub's ids).
- Every path to a `.md` file written in a Markdown document exists, and so
  does every path of a document under docs/, bench/, tests/, ... named in
  any file.
- Every decision record has its four sections and is in the index.

Needs no build and no tool beyond git (without .git, the tree is walked)."""

import os
import re
import subprocess
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# Built from pieces so that this file does not match itself.
OUTSIDE = re.compile("DESIGN" + r"\.md" + "|" + r"\.\./" + "shared" + r"\b")

SKIP_DIRS = (".git", ".tools", "node_modules")
# A copy of the previous release's chart, links as they were in its own tree.
SKIP_PREFIXES = ("tests/e2e/fixtures/",)

CITATION = re.compile(r'([\w./-]+\.md),\s*(?:(?://|#|\*)\s*)?"([^"\n]+)"')
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
MD_PATH = re.compile(r"(?<![\w/.:-])((?:\.\.?/)*[\w.-]+(?:/[\w.-]+)*\.md)\b")
# A document of this repository named by its path from the top, in any file.
REPO_DOC = re.compile(r"(?<![\w/.$:-])((?:docs|bench|tests|scripts|charts|examples)/[\w./-]*\.md)\b")


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True,
                             check=True).stdout
        files = [f for f in out.split("\n") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return [f for f in files
            if not f.startswith(SKIP_DIRS) and os.path.isfile(os.path.join(ROOT, f))]


def read_text(rel):
    try:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
            return fh.read()
    except UnicodeDecodeError:
        return None


def without_code_blocks(text):
    return re.sub(r"(?ms)^```.*?^```", "", text)


def headings(path):
    with open(path, encoding="utf-8") as fh:
        text = without_code_blocks(fh.read())
    return [h.strip() for h in re.findall(r"(?m)^#{1,6} (.+)$", text)]


def paragraph_leads(path):
    """`**Lead.**` at the start of a line, and a line that is only `Lead:`."""
    with open(path, encoding="utf-8") as fh:
        text = without_code_blocks(fh.read())
    leads = re.findall(r"(?m)^\*\*([^*\n]+?)\.?\*\*", text)
    leads += re.findall(r"(?m)^([A-Z][\w ,'-]*):$", text)
    return [x.strip() for x in leads]


def github_anchor(heading):
    """The id GitHub gives a Markdown heading (as tests/packaging/test_alerts.py)."""
    a = heading.strip().lower()
    a = re.sub(r"[^\w\- ]", "", a)
    return a.replace(" ", "-")


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


class RepositoryStandsOnItsOwn(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = [f for f in tracked_files() if not f.startswith(SKIP_PREFIXES)]
        cls.texts = {}
        for f in cls.files:
            text = read_text(f)
            if text is not None:
                cls.texts[f] = text
        cls.markdown = sorted(f for f in cls.texts if f.endswith(".md"))

    def test_the_files_are_found(self):
        self.assertIn("docs/architecture.md", self.markdown)
        self.assertIn("src/cli/serve.cpp", self.texts)

    def test_nothing_cites_a_document_outside_the_repository(self):
        found = ["%s:%d: %s" % (f, line_of(t, m.start()), m.group(0))
                 for f, t in sorted(self.texts.items()) for m in OUTSIDE.finditer(t)]
        self.assertEqual(found, [], "cite the in-repo document that states it instead")

    def resolve(self, citing, doc):
        for path in (os.path.join(ROOT, doc), os.path.join(ROOT, os.path.dirname(citing), doc)):
            if os.path.isfile(path):
                return path
        return None

    def test_heading_citations_name_a_heading(self):
        bad = []
        n = 0
        for f, text in sorted(self.texts.items()):
            for m in CITATION.finditer(text):
                doc, heading = m.group(1), m.group(2)
                n += 1
                where = "%s:%d" % (f, line_of(text, m.start()))
                target = self.resolve(f, doc)
                if target is None:
                    bad.append("%s: no file %s" % (where, doc))
                elif heading not in headings(target) and heading not in paragraph_leads(target):
                    bad.append('%s: %s has no heading "%s"' % (where, doc, heading))
        self.assertGreater(n, 40)
        self.assertEqual(bad, [])

    def test_relative_links_resolve(self):
        bad = []
        for f in self.markdown:
            text = self.texts[f]
            for m in LINK.finditer(text):
                url = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", url):
                    continue
                path, _, anchor = url.partition("#")
                target = os.path.normpath(os.path.join(ROOT, os.path.dirname(f), path)) if path \
                    else os.path.join(ROOT, f)
                where = "%s:%d: %s" % (f, line_of(text, m.start()), url)
                if not os.path.exists(target):
                    bad.append(where + " (no such file)")
                elif anchor and target.endswith(".md") and \
                        anchor not in [github_anchor(h) for h in headings(target)]:
                    bad.append(where + " (no such heading)")
        self.assertEqual(bad, [])

    def test_markdown_names_only_existing_documents(self):
        bad = []
        for f in self.markdown:
            text = self.texts[f]
            for m in MD_PATH.finditer(text):
                ref = m.group(1)
                if re.search(r"https?://\S*$", text[max(0, m.start() - 200):m.start()]):
                    continue
                if self.resolve(f, ref) is None:
                    bad.append("%s:%d: %s" % (f, line_of(text, m.start()), ref))
        self.assertEqual(bad, [])

    def test_paths_to_documents_exist(self):
        bad = ["%s:%d: %s" % (f, line_of(t, m.start()), m.group(1))
               for f, t in sorted(self.texts.items()) for m in REPO_DOC.finditer(t)
               if not os.path.isfile(os.path.join(ROOT, m.group(1)))]
        self.assertEqual(bad, [])

    def test_decision_records_have_their_sections_and_are_indexed(self):
        d = os.path.join(ROOT, "docs", "decisions")
        with open(os.path.join(d, "README.md"), encoding="utf-8") as fh:
            index = fh.read()
        records = sorted(n for n in os.listdir(d) if re.match(r"^\d{4}-[a-z0-9-]+\.md$", n))
        self.assertGreater(len(records), 0)
        for i, name in enumerate(records, start=1):
            with self.subTest(record=name):
                self.assertTrue(name.startswith("%04d-" % i), "numbered without gaps")
                self.assertEqual(headings(os.path.join(d, name))[1:5],
                                 ["Context", "Decision", "Consequences", "Measurement"])
                self.assertIn("](%s)" % name, index)


if __name__ == "__main__":
    unittest.main()
