"""Shell completion, the man page and the install rule, the real binary: `completion bash` is accepted by `bash -n`
and completes through bash's own completion function, `man` renders with groff without warnings, and
`cmake --install` puts the binary, both completions, the man page and the kubectl plugin's name in place."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402

COMMANDS = ["evaluate", "explain", "serve", "certs", "selftest", "cleanup", "completion", "man", "version", "help"]


class Completion(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        h.require_binary()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ig-e2e-completion-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def generated(self, *args):
        proc = h.run_binary(list(args))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        path = os.path.join(self.tmp, "_".join(args))
        with open(path, "wb") as f:
            f.write(proc.stdout)
        return path

    def complete(self, script, *words):
        """What bash's completion function offers for `words` (the last one being typed), in a subshell."""
        line = " ".join("'%s'" % w for w in words)
        code = ("source %s\nCOMP_WORDS=(%s)\nCOMP_CWORD=%d\n_isolation_gate\nprintf '%%s\\n' \"${COMPREPLY[@]}\"\n"
                % (script, line, len(words) - 1))
        proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=30, cwd=self.tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return [w for w in proc.stdout.decode().splitlines() if w]

    def test_bash_completion_parses_and_completes_commands_flags_and_values(self):
        script = self.generated("completion", "bash")
        proc = subprocess.run(["bash", "-n", script], stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(self.complete(script, "isolation-gate", "ev"), ["evaluate"])
        self.assertEqual(sorted(self.complete(script, "isolation-gate", "")), sorted(COMMANDS))
        self.assertEqual(self.complete(script, "isolation-gate", "evaluate", "--filen"), ["--filename"])
        self.assertEqual(self.complete(script, "isolation-gate", "evaluate", "-o", ""),
                         ["text", "json", "yaml", "junit", "sarif"])
        self.assertEqual(self.complete(script, "isolation-gate", "evaluate", "--shape", "cu"), ["customer-isolation"])
        self.assertIn("--cert-mode", self.complete(script, "isolation-gate", "serve", "--cert"))
        open(os.path.join(self.tmp, "pods.yaml"), "w").close()
        self.assertEqual(self.complete(script, "isolation-gate", "evaluate", "-f", "pod"), ["pods.yaml"])
        self.assertEqual(self.complete(script, "isolation-gate", "completion", "z"), ["zsh"])

    def test_zsh_completion_parses(self):
        script = self.generated("completion", "zsh")
        with open(script, encoding="utf-8") as f:
            text = f.read()
        self.assertTrue(text.startswith("#compdef isolation-gate kubectl-isolation_gate\n"))
        for command in COMMANDS:
            self.assertIn("    %s)\n" % command, text)
        zsh = shutil.which("zsh")
        if zsh is None:
            self.skipTest("zsh not installed: only the script's contents are checked")
        proc = subprocess.run([zsh, "-n", script], stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_man_page_documents_every_command_and_flag_and_renders_cleanly(self):
        page = self.generated("man")
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for command in COMMANDS:
            self.assertIn(".SS %s\n" % command, text)
        for flag in ("\\-f, \\-\\-filename", "\\-\\-components", "\\-o, \\-\\-output", "\\-\\-shape",
                     "\\-\\-cert\\-mode", "\\-\\-out\\-dir"):
            self.assertIn("\\fB" + flag + "\\fR", text)
        groff = shutil.which("groff")
        if groff is None:
            self.skipTest("groff not installed")
        proc = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", page], stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, b"")

    def test_unknown_shell_is_bad_input(self):
        proc = h.run_binary(["completion", "fish"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("shell", proc.stderr.decode())

    def test_install_puts_binary_completion_man_page_and_kubectl_plugin_in_place(self):
        build = os.path.dirname(h.BINARY)
        if not os.path.isfile(os.path.join(build, "cmake_install.cmake")):
            self.skipTest("IG_BINARY is not in a CMake build directory")
        prefix = os.path.join(self.tmp, "prefix")
        proc = subprocess.run(["cmake", "--install", build, "--prefix", prefix], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        for rel in ("bin/isolation-gate", "share/bash-completion/completions/isolation-gate",
                    "share/zsh/vendor-completions/_isolation-gate", "share/man/man1/isolation-gate.1"):
            self.assertTrue(os.path.isfile(os.path.join(prefix, rel)), rel)
        plugin = os.path.join(prefix, "bin", "kubectl-isolation_gate")
        self.assertEqual(os.readlink(plugin), "isolation-gate")
        proc = subprocess.run([plugin, "version"], stdout=subprocess.PIPE, timeout=30)
        self.assertEqual(proc.returncode, 0)
        self.assertTrue(proc.stdout.startswith(b"isolation-gate "))
        kubectl = shutil.which("kubectl") or os.path.join(h.SOURCE_DIR, ".tools", "bin", "kubectl")
        if not os.access(kubectl, os.X_OK):
            self.skipTest("kubectl not installed")
        # kubectl finds the plugin on PATH and runs it for `kubectl isolation-gate ...`.
        env = dict(os.environ, PATH=os.path.join(prefix, "bin") + os.pathsep + os.environ.get("PATH", ""))
        proc = subprocess.run([kubectl, "isolation-gate", "version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(proc.stdout.startswith(b"isolation-gate "), proc.stdout)


if __name__ == "__main__":
    unittest.main()
