"""The runtime image (scripts/image.sh): shell-less, and it runs.

Run:  IG_IMAGE=localhost/isolation-gate:test IG_BINARY=build/isolation-gate \
        /usr/bin/python3 -m unittest discover -v -s tests/image
(scripts/test.sh, stage image, builds the image from the optimised build's
binary and runs this.) Needs podman and runc (scripts/install-deps.sh
--release). IG_IMAGE unset skips every test.

- the image's files are only the binary, its libraries, CA certificates,
  /etc/passwd and /etc/group and dpkg status stanzas: no /bin/sh, no dpkg, no
  apt, no busybox; a shell cannot be started in it;
- it runs as 65532:65532;
- `version`, and `evaluate` on examples/, answer as the binary outside the
  image does (same output, same exit code);
- `serve --local` (host network, a certificate chain of its own written with
  --ca-out) answers /readyz and one AdmissionReview over HTTPS.
"""

import json
import os
import shutil
import socket
import ssl
import subprocess
import tarfile
import tempfile
import time
import unittest
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
IMAGE = os.environ.get("IG_IMAGE")
BINARY = os.environ.get("IG_BINARY", os.path.join(ROOT, "build", "isolation-gate"))
PODMAN = shutil.which("podman")
RUN = ["--rm", "--runtime", "runc", "--ulimit", "nofile=1024:4096", "--ulimit", "nproc=1024:4096"]
TIMEOUT = 120


def podman(*args, check=True, timeout=TIMEOUT, **kw):
    p = subprocess.run([PODMAN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError("podman %s failed (%d):\n%s%s" % (" ".join(args), p.returncode,
                             p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")))
    return p


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(IMAGE and PODMAN, "IG_IMAGE not set or podman missing (scripts/test.sh stage image)")
class ImageTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cid = podman("create", "--runtime", "runc", IMAGE).stdout.decode().strip()
        try:
            with tempfile.TemporaryFile() as f:
                subprocess.run([PODMAN, "export", cid], stdout=f, check=True, timeout=TIMEOUT)
                f.seek(0)
                with tarfile.open(fileobj=f) as t:
                    cls.members = {m.name.lstrip("./").rstrip("/"): m for m in t.getmembers()}
        finally:
            podman("rm", cid, check=False)
        cls.inspect = json.loads(podman("image", "inspect", IMAGE).stdout)[0]

    def test_only_the_binary_its_libraries_and_certificates(self):
        allowed_prefixes = ("usr/local/bin/isolation-gate", "lib/", "lib64/", "usr/lib/",
                            "etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt",
                            "var/lib/dpkg/status.d/")
        # Mount points and files the container runtime itself adds.
        runtime = {"dev", "proc", "sys", "run", "etc/hosts", "etc/hostname", "etc/resolv.conf",
                   "run/.containerenv", "tmp"}
        files = [n for n, m in self.members.items() if not m.isdir()]
        odd = [n for n in files if not n.startswith(allowed_prefixes) and n not in runtime]
        self.assertEqual(odd, [], "files in the image besides binary, libraries, certificates, passwd")
        self.assertIn("usr/local/bin/isolation-gate", files)
        for name in ("bin/sh", "usr/bin/sh", "bin/bash", "bin/dash", "bin/busybox", "usr/bin/dpkg",
                     "usr/bin/apt", "usr/bin/apt-get", "var/lib/dpkg/status"):
            self.assertNotIn(name, self.members, name)
        libs = [n for n in files if n.startswith(("lib/", "lib64/", "usr/lib/"))]
        self.assertTrue(any("libcpprest" in n for n in libs), libs)
        self.assertTrue(any("ld-linux" in n for n in libs), libs)

    def test_no_shell_starts(self):
        p = podman("run", *RUN, "--entrypoint", "/bin/sh", IMAGE, "-c", "true", check=False)
        self.assertNotEqual(p.returncode, 0, "a shell ran in the image")

    def test_config(self):
        cfg = self.inspect["Config"]
        self.assertEqual(cfg.get("User"), "65532:65532")
        self.assertEqual(cfg.get("Entrypoint"), ["/usr/local/bin/isolation-gate"])
        self.assertEqual(cfg.get("Cmd"), ["serve"])
        passwd = self.members["etc/passwd"]
        self.assertTrue(passwd.isfile())

    def test_version(self):
        out = podman("run", *RUN, IMAGE, "version").stdout.decode()
        want = subprocess.run([BINARY, "version"], stdout=subprocess.PIPE, check=True,
                              timeout=TIMEOUT).stdout.decode()
        self.assertTrue(out.startswith("isolation-gate "), out)
        # The same version; the revision is the image build's.
        self.assertEqual(out.split()[1], want.split()[1])

    def test_evaluate_as_the_binary_outside(self):
        for sandbox in ("unavailable", "available"):
            args = ["evaluate", "--component", "examples/components/report-parser.yaml",
                    "--pod", "examples/pods/report-parser-pod.yaml", "--sandbox", sandbox]
            inside = podman("run", *RUN, "-v", "%s/examples:/examples:ro" % ROOT, IMAGE, *args,
                            check=False)
            outside = subprocess.run([BINARY] + args, cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, timeout=TIMEOUT)
            self.assertLess(inside.returncode, 125, inside.stderr)
            self.assertEqual((inside.returncode, inside.stdout), (outside.returncode, outside.stdout))
            self.assertIn(b"report-parser", inside.stdout)

    def test_serve_local_answers_readyz_and_a_review(self):
        tmp = tempfile.mkdtemp(prefix="ig-image-")
        os.chmod(tmp, 0o777)  # the image's user writes --ca-out here
        port, metrics = free_port(), free_port()
        name = "ig-image-test-%d" % os.getpid()
        podman("run", "-d", "--name", name, *RUN, "--network", "host",
               "-v", "%s/examples:/examples:ro" % ROOT, "-v", "%s:/out" % tmp, IMAGE,
               "serve", "--local", "--components", "/examples/components", "--sandbox", "available",
               "--listen", "127.0.0.1:%d" % port, "--metrics-listen", "127.0.0.1:%d" % metrics,
               "--ca-out", "/out/ca.pem", "--drain-delay", "0s")
        try:
            deadline = time.monotonic() + 60
            status, last = None, None
            while time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % metrics, timeout=2) as r:
                        status = r.status
                        break
                except OSError as e:
                    last = e
                    time.sleep(0.2)
            logs = podman("logs", name, check=False)
            self.assertEqual(status, 200, "readyz: %r\n%s" % (last, logs.stderr.decode(errors="replace")))

            ctx = ssl.create_default_context(cafile=os.path.join(tmp, "ca.pem"))
            ctx.check_hostname = False  # the certificate names the Service, not 127.0.0.1
            with open(os.path.join(ROOT, "examples", "reviews", "report-parser-pod.json"), "rb") as f:
                review = f.read()
            req = urllib.request.Request("https://127.0.0.1:%d/mutate/pods" % port, data=review,
                                         headers={"Content-Type": "application/json"}, method="POST")
            with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                self.assertEqual(r.status, 200)
                body = json.loads(r.read())
            self.assertEqual(body["kind"], "AdmissionReview")
            self.assertEqual(body["response"]["uid"], json.loads(review)["request"]["uid"])
            self.assertIn("allowed", body["response"])
        finally:
            podman("stop", "-t", "5", name, check=False)
            podman("rm", "-f", name, check=False)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
