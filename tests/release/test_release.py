"""The release dry run's outputs (scripts/release.sh VERSION, in dist/).

Run:  /usr/bin/python3 -m unittest discover -v -s tests/release
The dist/ checks need dist/ from `scripts/release.sh VERSION` (.ci/run's
release stage runs it, then this); without dist/SHA256SUMS they are skipped.
(The workflow files are checked by tests/packaging/test_workflows.py.)

- the OCI archive's index.json holds one image index whose manifests are
  exactly linux/amd64 and linux/arm64, each an image of its architecture
  whose config runs /usr/local/bin/isolation-gate as 65532;
- the SBOM is SPDX 2.3 JSON with the specification's required fields, names
  isolation-gate and the Debian packages of both architectures' libraries;
- SHA256SUMS verifies (sha256sum -c) and covers every file in dist/;
- the chart has image.tag VERSION and image.digest the index's digest;
- each CLI tarball holds bin/isolation-gate with an $ORIGIN rpath and lib/
  without glibc; the amd64 one runs with an empty environment.
"""

import glob
import hashlib
import json
import os
import re
import subprocess
import tarfile
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DIST = os.environ.get("IG_DIST", os.path.join(ROOT, "dist"))
HAVE_DIST = os.path.exists(os.path.join(DIST, "SHA256SUMS"))


def only(pattern):
    found = glob.glob(os.path.join(DIST, pattern))
    assert len(found) == 1, "%s: %s" % (pattern, found)
    return found[0]


@unittest.skipUnless(HAVE_DIST, "no dist/SHA256SUMS: run scripts/release.sh VERSION first")
class DistTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.oci = only("isolation-gate-*.oci.tar")
        cls.version = re.match(r"isolation-gate-(.+)\.oci\.tar$", os.path.basename(cls.oci)).group(1)
        cls.tar = tarfile.open(cls.oci)

    @classmethod
    def tearDownClass(cls):
        cls.tar.close()

    def blob(self, digest):
        algo, hexd = digest.split(":")
        data = self.tar.extractfile("blobs/%s/%s" % (algo, hexd)).read()
        self.assertEqual(hashlib.sha256(data).hexdigest(), hexd, "blob content matches its digest")
        return json.loads(data)

    def test_index_has_both_platforms(self):
        layout = json.load(self.tar.extractfile("oci-layout"))
        self.assertEqual(layout["imageLayoutVersion"], "1.0.0")
        top = json.load(self.tar.extractfile("index.json"))
        self.assertEqual(len(top["manifests"]), 1)
        desc = top["manifests"][0]
        self.assertEqual(desc["mediaType"], "application/vnd.oci.image.index.v1+json")
        with open(only("isolation-gate-*.digest")) as f:
            self.assertEqual(f.read().strip(), desc["digest"])
        index = self.blob(desc["digest"])
        platforms = sorted("%s/%s" % (m["platform"]["os"], m["platform"]["architecture"])
                           for m in index["manifests"])
        self.assertEqual(platforms, ["linux/amd64", "linux/arm64"])
        for m in index["manifests"]:
            self.assertEqual(m["mediaType"], "application/vnd.oci.image.manifest.v1+json")
            manifest = self.blob(m["digest"])
            config = self.blob(manifest["config"]["digest"])
            self.assertEqual(config["architecture"], m["platform"]["architecture"])
            self.assertEqual(config["os"], "linux")
            self.assertEqual(config["config"]["User"], "65532:65532")
            self.assertEqual(config["config"]["Entrypoint"], ["/usr/local/bin/isolation-gate"])
            self.assertEqual(config["config"]["Labels"]["org.opencontainers.image.version"], self.version)
            self.assertEqual(len(manifest["layers"]), 1, "one layer: the root made by scripts/image.sh")

    def test_sbom_is_spdx_23(self):
        with open(only("isolation-gate-*.spdx.json")) as f:
            doc = json.load(f)
        for field in ("spdxVersion", "dataLicense", "SPDXID", "name", "documentNamespace", "creationInfo"):
            self.assertIn(field, doc)
        self.assertEqual(doc["spdxVersion"], "SPDX-2.3")
        self.assertEqual(doc["dataLicense"], "CC0-1.0")
        self.assertEqual(doc["SPDXID"], "SPDXRef-DOCUMENT")
        self.assertTrue(doc["creationInfo"]["creators"])
        self.assertRegex(doc["creationInfo"]["created"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        ids = set()
        for p in doc["packages"]:
            for field in ("name", "SPDXID", "downloadLocation"):
                self.assertIn(field, p, p)
            self.assertRegex(p["SPDXID"], r"^SPDXRef-[A-Za-z0-9.-]+$")
            self.assertNotIn(p["SPDXID"], ids)
            ids.add(p["SPDXID"])
        for r in doc["relationships"]:
            for end in (r["spdxElementId"], r["relatedSpdxElement"]):
                self.assertTrue(end == "SPDXRef-DOCUMENT" or end in ids
                                or end in {f["SPDXID"] for f in doc["files"]}, end)
        product = [p for p in doc["packages"] if p["name"] == "isolation-gate"]
        self.assertEqual([p["versionInfo"] for p in product], [self.version])
        purls = [r["referenceLocator"] for p in doc["packages"] for r in p.get("externalRefs", [])]
        for arch in ("amd64", "arm64"):
            self.assertTrue(any(u.startswith("pkg:deb/debian/libcpprest2.10@") and "arch=" + arch in u
                                for u in purls), purls)
            self.assertTrue(any(u.startswith("pkg:deb/debian/libc6@") and "arch=" + arch in u for u in purls))
        self.assertTrue(any(u.startswith("pkg:deb/debian/nlohmann-json3-dev@") for u in purls))

    def test_sha256sums_verify_and_cover_dist(self):
        subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=DIST, check=True,
                       stdout=subprocess.PIPE, timeout=120)
        with open(os.path.join(DIST, "SHA256SUMS")) as f:
            listed = {line.split(None, 1)[1].strip().lstrip("*") for line in f if line.strip()}
        self.assertEqual(listed, set(os.listdir(DIST)) - {"SHA256SUMS"})

    def test_chart_names_the_released_image(self):
        chart = only("isolation-gate-chart-*.tgz")
        with open(only("isolation-gate-*.digest")) as f:
            digest = f.read().strip()
        with tarfile.open(chart) as t:
            values = t.extractfile("isolation-gate/values.yaml").read().decode()
            meta = t.extractfile("isolation-gate/Chart.yaml").read().decode()
        block = values.split("\nimage:", 1)[1].split("\n\n", 1)[0]
        self.assertIn('tag: "%s"' % self.version, block)
        if re.search(r"^\s+digest:", block, re.M):
            self.assertIn('digest: "%s"' % digest, block)
        self.assertRegex(meta, r'(?m)^version: "?%s"?$' % re.escape(self.version))
        self.assertRegex(meta, r'(?m)^appVersion: "?%s"?$' % re.escape(self.version))

    def test_cli_tarballs(self):
        for arch, machine in (("amd64", "X86-64"), ("arm64", "AArch64")):
            path = only("isolation-gate-*-linux-%s.tar.gz" % arch)
            with tempfile.TemporaryDirectory() as d, tarfile.open(path) as t:
                t.extractall(d)
                top = os.path.join(d, os.listdir(d)[0])
                binary = os.path.join(top, "bin", "isolation-gate")
                dyn = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
                self.assertIn("$ORIGIN/../lib", dyn)
                hdr = subprocess.run(["readelf", "-h", binary], capture_output=True, text=True, check=True).stdout
                self.assertIn(machine, hdr)
                libs = os.listdir(os.path.join(top, "lib"))
                self.assertTrue(any(n.startswith("libcpprest") for n in libs), libs)
                self.assertFalse([n for n in libs if re.match(r"(libc|libm|ld-linux.*)\.so", n)], libs)
                if arch == "amd64":
                    out = subprocess.run([binary, "version"], env={}, capture_output=True, text=True,
                                         timeout=60, check=True).stdout
                    self.assertTrue(out.startswith("isolation-gate %s" % self.version.split("-")[0]), out)


if __name__ == "__main__":
    unittest.main()
