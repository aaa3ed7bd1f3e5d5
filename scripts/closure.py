#!/usr/bin/env python3
"""The shared-library closure of an ELF binary, resolved to Debian packages.

Walks DT_NEEDED (readelf -d, which reads any architecture's ELF, so the
arm64 binary is resolved on an amd64 host without running it) from the
binary through every library it loads, in the multiarch directories of the
binary's architecture, plus its program interpreter (PT_INTERP). Every file
is resolved to the Debian package that ships it (dpkg -S), so an image or a
tarball made from the closure holds the libraries of the very packages the
binary was linked against.

  closure.py BINARY --arch amd64|arm64 --json OUT.json [--rootfs DIR] [--libdir DIR]

--rootfs copies each library to the path the loader looks for it under
DIR (the file's contents, not a symlink). --libdir copies the libraries other
than glibc's (libc, libm, the loader, ...) flat into DIR, for the CLI
tarball (the binary's $ORIGIN/../lib rpath). The JSON lists files
(soname, path, package, version, sha256) and packages (name, version, arch).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

TRIPLET = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
# glibc's own libraries: the CLI tarball relies on the host's glibc (the
# loader must be the host's); the image carries them.
GLIBC = re.compile(r"^(ld-linux.*|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libnss_.*)\.so")


def readelf(args, path):
    return subprocess.run(["readelf", "-W"] + args + [path], check=True, capture_output=True,
                          text=True, env=dict(os.environ, LC_ALL="C")).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf(["-d"], path))


def interpreter(path):
    m = re.search(r"\[Requesting program interpreter: ([^\]]+)\]", readelf(["-l"], path))
    return m.group(1) if m else None


def machine(path):
    return re.search(r"Machine:\s+(.*)", readelf(["-h"], path)).group(1).strip()


def owner(path, arch):
    """(package, version) of the Debian package that ships path."""
    real = os.path.realpath(path)
    candidates = [path, real]
    for p in (path, real):
        candidates.append(p[4:] if p.startswith("/usr/") else "/usr" + p)
    for c in candidates:
        r = subprocess.run(["dpkg-query", "-S", c], capture_output=True, text=True)
        if r.returncode == 0:
            for line in r.stdout.splitlines():
                pkgs = line.split(": ", 1)[0]
                for pkg in (p.strip() for p in pkgs.split(",")):
                    name, _, parch = pkg.partition(":")
                    if parch and parch != arch:
                        continue
                    spec = name + (":" + arch if parch else "")
                    v = subprocess.run(["dpkg-query", "-W", "-f=${Version}\t${Architecture}", spec],
                                       capture_output=True, text=True, check=True).stdout.split("\t")
                    return name, v[0], v[1]
    raise SystemExit("closure: no Debian package ships %s" % path)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--arch", required=True, choices=sorted(TRIPLET))
    ap.add_argument("--json", required=True)
    ap.add_argument("--rootfs")
    ap.add_argument("--libdir")
    a = ap.parse_args()
    want = {"amd64": "X86-64", "arm64": "AArch64"}[a.arch]
    if want not in machine(a.binary):
        raise SystemExit("closure: %s is not a %s binary (%s)" % (a.binary, a.arch, machine(a.binary)))
    t = TRIPLET[a.arch]
    dirs = ["/lib/" + t, "/usr/lib/" + t, "/lib", "/usr/lib"]

    files = {}  # soname -> path the loader finds it at
    interp = interpreter(a.binary)
    if interp:
        files[os.path.basename(interp)] = interp
    todo = [a.binary]
    seen = set()
    while todo:
        f = todo.pop()
        for so in needed(f):
            if so in seen:
                continue
            seen.add(so)
            for d in dirs:
                p = os.path.join(d, so)
                if os.path.exists(p) and want in machine(os.path.realpath(p)):
                    files.setdefault(so, p)
                    todo.append(os.path.realpath(p))
                    break
            else:
                raise SystemExit("closure: %s (needed by %s) not found in %s" % (so, f, dirs))

    out = {"binary": a.binary, "arch": a.arch, "interpreter": interp, "files": [], "packages": []}
    pkgs = {}
    for so, p in sorted(files.items()):
        name, version, parch = owner(p, a.arch)
        pkgs[name] = {"name": name, "version": version, "arch": parch}
        out["files"].append({"soname": so, "path": p, "package": name, "version": version,
                             "glibc": bool(GLIBC.match(so)), "sha256": sha256(p)})
        if a.rootfs:
            # ld.so's own path is PT_INTERP; the others where this host has them
            # (/lib/<triplet> or /usr/lib/<triplet>: glibc's built-in search path).
            dst = os.path.join(a.rootfs, p.lstrip("/"))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.realpath(p), dst)
        if a.libdir and not GLIBC.match(so):
            os.makedirs(a.libdir, exist_ok=True)
            shutil.copy2(os.path.realpath(p), os.path.join(a.libdir, so))
    out["packages"] = sorted(pkgs.values(), key=lambda p: p["name"])
    with open(a.json, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    for p in out["packages"]:
        print("closure: %s %s (%s)" % (p["name"], p["version"], p["arch"]), file=sys.stderr)


if __name__ == "__main__":
    main()
