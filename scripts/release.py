#!/usr/bin/env python3
"""Packs a release a merchant deploys without compiling anything.

    scripts/release.py --functions DIR --arch arm64 --out DIR [--cli NAME=PATH ...]

DIR holds the Lambda binaries, as `cargo lambda build` lays them out (`DIR/<binary>/bootstrap`)
or flat (`DIR/<binary>`). The release folder gets:

- `functions/<binary>.zip`: each function's binary as `bootstrap` (mode 0755), what Lambda runs;
- `template.yaml`: template.yaml with each function's `CodeUri` its zip (and `Architectures`
  the packed binaries', when they are not the template's arm64: a test package of host-built
  binaries), nothing else changed, so `sam deploy` uploads the zips itself;
- `samconfig.toml`: the config environments (`sam deploy --config-env sandbox`);
- `bin/paymos-inbox-<target>`: the command line, for each `--cli`;
- `SHA256SUMS`: every file above, as `sha256sum -c` reads it.
"""
import argparse
import hashlib
import os
import re
import shutil
import stat
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A fixed time inside each zip: the same binary packs to the same bytes.
ZIP_TIME = (2020, 1, 1, 0, 0, 0)


def binary_of(functions: str, name: str) -> str:
    for candidate in (os.path.join(functions, name, "bootstrap"), os.path.join(functions, name)):
        if os.path.isfile(candidate):
            return candidate
    sys.exit(f"no binary {name} in {functions}: build the functions first")


def pack(source: str, zip_path: str) -> None:
    info = zipfile.ZipInfo("bootstrap", date_time=ZIP_TIME)
    info.create_system = 3  # Unix: the mode below is read
    info.external_attr = (stat.S_IFREG | 0o755) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    with open(source, "rb") as f, zipfile.ZipFile(zip_path, "w") as z:
        z.writestr(info, f.read())


def derive_template(arch: str, code_uri, out_path: str) -> list:
    """Writes template.yaml with each function's `CodeUri` as `code_uri(binary)` and, unless
    `arch` is the template's arm64, its `Architectures`; returns the binaries its functions
    name. Nothing else changes (the release's packaging test holds it)."""
    lines = open(os.path.join(ROOT, "template.yaml"), encoding="utf-8").read().splitlines(True)
    binary, binaries, written = None, [], []
    for line in lines:
        if re.match(r"^  [A-Za-z0-9]+:\s*$", line):
            binary = None
        found = re.match(r"^\s+Binary:\s*(\S+)\s*$", line)
        if found:
            binary = found.group(1)
        if arch != "arm64" and re.match(r"^\s+Architectures: \[arm64\]\s*$", line):
            line = line.replace("[arm64]", f"[{arch}]")
        if re.match(r"^      CodeUri: \.\s*$", line):
            if binary is None:
                sys.exit("a function's CodeUri comes before its Binary")
            binaries.append(binary)
            line = f"      CodeUri: {code_uri(binary)}\n"
        written.append(line)
    with open(out_path, "w", encoding="utf-8") as f:
        f.writelines(written)
    return binaries


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--functions", required=True)
    args.add_argument("--arch", choices=["arm64", "x86_64"], required=True)
    args.add_argument("--out", required=True)
    args.add_argument("--cli", action="append", default=[], metavar="TARGET=PATH")
    a = args.parse_args()
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(os.path.join(a.out, "functions"))
    code_uri = lambda binary: f"functions/{binary}.zip"  # noqa: E731
    for binary in derive_template(a.arch, code_uri, os.path.join(a.out, "template.yaml")):
        pack(binary_of(a.functions, binary), os.path.join(a.out, "functions", f"{binary}.zip"))
    shutil.copy(os.path.join(ROOT, "samconfig.toml"), a.out)
    for cli in a.cli:
        target, path = cli.split("=", 1)
        os.makedirs(os.path.join(a.out, "bin"), exist_ok=True)
        dest = os.path.join(a.out, "bin", f"paymos-inbox-{target}")
        shutil.copy(path, dest)
        os.chmod(dest, 0o755)
    files = sorted(
        os.path.relpath(os.path.join(d, f), a.out)
        for d, _, fs in os.walk(a.out)
        for f in fs
        if f != "SHA256SUMS"
    )
    with open(os.path.join(a.out, "SHA256SUMS"), "w", encoding="utf-8") as f:
        for rel in files:
            f.write(f"{sha256(os.path.join(a.out, rel))}  {rel}\n")
    print(a.out)


if __name__ == "__main__":
    main()
