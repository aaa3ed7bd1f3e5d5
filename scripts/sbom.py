#!/usr/bin/env python3
"""SPDX 2.3 JSON SBOM of an isolation-gate release (scripts/release.sh).

  sbom.py --version V --revision R --out FILE CLOSURE.json [CLOSURE.json ...]
          [--image-digest sha256:...] [--file NAME=SHA256 ...]

Packages: isolation-gate itself; per architecture, the Debian packages whose
shared libraries the binary loads (from scripts/closure.py: the image's and
the CLI tarball's libraries) and ca-certificates (in the image); and the
binary's own build dependencies compiled into it (header-only or static:
nlohmann-json, CLI11, Boost's headers: Asio and Beast), at the versions
installed on the build machine (dpkg-query). Each Debian package has a purl
(pkg:deb/debian/NAME@VERSION?arch=ARCH&distro=debian-12).
"""
import argparse
import datetime
import json
import subprocess
import urllib.parse
import uuid

# Compiled into the binary (headers), not loaded at run time.
BUILD_DEPS = ["nlohmann-json3-dev", "libcli11-dev", "libboost1.74-dev"]


def dpkg_version(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}\t${Architecture}\t${Homepage}", pkg],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return r.stdout.split("\t")


def spdx_id(*parts):
    s = "-".join(parts)
    return "SPDXRef-" + "".join(c if c.isalnum() or c in ".-" else "-" for c in s)


def deb_package(name, version, arch):
    purl = "pkg:deb/debian/%s@%s?arch=%s&distro=debian-12" % (
        name, urllib.parse.quote(version, safe=""), arch)
    return {
        "name": name,
        "SPDXID": spdx_id("deb", name, arch),
        "versionInfo": version,
        "supplier": "Organization: Debian",
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "NOASSERTION",
        "copyrightText": "NOASSERTION",
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                          "referenceLocator": purl}],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("closures", nargs="+")
    ap.add_argument("--version", required=True)
    ap.add_argument("--revision", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--image-digest")
    ap.add_argument("--file", action="append", default=[], help="NAME=SHA256 of a release file")
    a = ap.parse_args()

    main_id = "SPDXRef-Package-isolation-gate"
    product = {
        "name": "isolation-gate",
        "SPDXID": main_id,
        "versionInfo": a.version,
        "supplier": "Organization: zeroroot.ai",
        "downloadLocation": "git+https://github.com/zeroroot-ai/isolation-gate@%s" % a.revision,
        "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "NOASSERTION",
        "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "APPLICATION",
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                          "referenceLocator": "pkg:github/zeroroot-ai/isolation-gate@v%s" % a.version}],
    }
    if a.image_digest:
        product["externalRefs"].append({
            "referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
            "referenceLocator": "pkg:oci/isolation-gate@%s?repository_url=ghcr.io/zeroroot-ai/isolation-gate"
                                % urllib.parse.quote(a.image_digest, safe="")})
    packages = [product]
    rels = [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
             "relatedSpdxElement": main_id}]
    seen = set()
    for path in a.closures:
        c = json.load(open(path))
        arch = c["arch"]
        runtime = [(p["name"], p["version"], p["arch"]) for p in c["packages"]]
        ca = dpkg_version("ca-certificates")
        if ca:
            runtime.append(("ca-certificates", ca[0], ca[1]))
        for name, version, parch in runtime:
            pkg = deb_package(name, version, parch)
            if pkg["SPDXID"] not in seen:
                seen.add(pkg["SPDXID"])
                pkg["comment"] = "runtime (%s): in the image and, but for glibc and ca-certificates, " \
                                 "the CLI tarball's lib/" % arch
                packages.append(pkg)
            rels.append({"spdxElementId": main_id, "relationshipType": "DEPENDS_ON",
                         "relatedSpdxElement": pkg["SPDXID"], "comment": "linux/%s" % arch})
    for name in BUILD_DEPS:
        v = dpkg_version(name)
        if not v:
            continue
        pkg = deb_package(name, v[0], v[1])
        pkg["comment"] = "build dependency compiled into the binary (headers)"
        packages.append(pkg)
        rels.append({"spdxElementId": pkg["SPDXID"], "relationshipType": "BUILD_DEPENDENCY_OF",
                     "relatedSpdxElement": main_id})

    files = []
    for spec in a.file:
        name, _, digest = spec.partition("=")
        fid = spdx_id("File", name)
        files.append({"fileName": "./" + name, "SPDXID": fid,
                      "checksums": [{"algorithm": "SHA256", "checksumValue": digest}],
                      "licenseConcluded": "NOASSERTION", "copyrightText": "NOASSERTION"})
        rels.append({"spdxElementId": fid, "relationshipType": "GENERATED_FROM",
                     "relatedSpdxElement": main_id})

    doc = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": "isolation-gate-%s" % a.version,
        "documentNamespace": "https://github.com/zeroroot-ai/isolation-gate/spdx/%s-%s" % (
            a.version, uuid.uuid5(uuid.NAMESPACE_URL, "%s/%s/%s" % (a.version, a.revision, a.image_digest))),
        "creationInfo": {
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "creators": ["Tool: isolation-gate scripts/sbom.py", "Organization: zeroroot.ai"],
        },
        "packages": packages,
        "files": files,
        "relationships": rels,
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
