#!/usr/bin/env python3
"""Writes the template `sam local invoke` runs with host-built binaries: template.yaml with each
function's CodeUri a folder holding its binary as `bootstrap`, and the host's architecture.

    scripts/sam-local-template.py BIN_DIR ARCH OUT_DIR

BIN_DIR holds the binaries cargo built (`target/debug` or `target/release`), ARCH is `x86_64`
or `arm64`. Nothing else differs from template.yaml: the packaging test of the release holds the
same for its own template. The functions' `Metadata` (cargo-lambda's build) is left as it is:
`sam local invoke` reads only the code folder.
"""
import os
import re
import shutil
import sys


def main() -> None:
    bin_dir, arch, out = sys.argv[1:4]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lines = open(os.path.join(root, "template.yaml"), encoding="utf-8").read().splitlines(True)
    binary, written, code = None, [], {}
    for line in lines:
        if re.match(r"^  [A-Za-z0-9]+:\s*$", line):
            binary = None
        found = re.match(r"^\s+Binary:\s*(\S+)\s*$", line)
        if found:
            binary = found.group(1)
        if re.match(r"^\s+Architectures: \[arm64\]\s*$", line):
            line = line.replace("[arm64]", f"[{arch}]")
        if re.match(r"^      CodeUri: \.\s*$", line):
            if binary is None:
                sys.exit("a function's CodeUri comes before its Binary: cannot derive the template")
            folder = os.path.join(os.path.abspath(out), "code", binary)
            code[binary] = folder
            line = f"      CodeUri: {folder}/\n"
        written.append(line)
    for binary, folder in code.items():
        os.makedirs(folder, exist_ok=True)
        source = os.path.join(bin_dir, binary)
        if not os.path.isfile(source):
            sys.exit(f"{source} is missing: build it first (cargo build -p paymos-inbox-lambda --bins)")
        shutil.copy2(source, os.path.join(folder, "bootstrap"))
    with open(os.path.join(out, "template.yaml"), "w", encoding="utf-8") as f:
        f.writelines(written)
    print(os.path.join(out, "template.yaml"))


if __name__ == "__main__":
    main()
