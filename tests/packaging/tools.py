"""What the packaging tests share: where the repository is, how a tool is
found (an IG_* variable, then the repository's .tools/bin, then PATH) and
how a command is run (bounded, its output captured, a failure shown whole)."""

import os
import shutil
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def find_tool(env_name, name):
    path = os.environ.get(env_name)
    if path:
        return path if os.access(path, os.X_OK) else None
    local = os.path.join(ROOT, ".tools", "bin", name)
    if os.access(local, os.X_OK):
        return local
    return shutil.which(name)


HELM = find_tool("IG_HELM", "helm")
# The chart refuses to render its placeholder image repository unless told it
# is a local image (image.allowPlaceholder): every render of the tests says so,
# but the ones that check that refusal.
LOCAL_IMAGE = ["--set", "image.allowPlaceholder=true"]
NO_HELM = "helm not installed: run scripts/install-k8s-tools.sh (or set IG_HELM)"


def run(args, check=True, stdin=None, **kw):
    proc = subprocess.run(args, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120, **kw)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(args), proc.returncode,
                                                       proc.stdout, proc.stderr))
    return proc
