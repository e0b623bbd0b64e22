#!/usr/bin/env python3
"""Writes the template `sam local invoke` runs with host-built binaries: template.yaml with each
function's CodeUri a folder holding its binary as `bootstrap`, and the host's architecture.

    scripts/sam-local-template.py BIN_DIR ARCH OUT_DIR

BIN_DIR holds the binaries cargo built (`target/debug` or `target/release`), ARCH is `x86_64`
or `arm64`. The template is derived as the release's is (scripts/release.py); the functions'
`Metadata` (cargo-lambda's build) stays: `sam local invoke` reads only the code folder.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from release import binary_of, derive_template  # noqa: E402


def main() -> None:
    bin_dir, arch, out = sys.argv[1:4]
    code = os.path.join(os.path.abspath(out), "code")
    template = os.path.join(out, "template.yaml")
    os.makedirs(out, exist_ok=True)
    for binary in derive_template(arch, lambda b: f"{os.path.join(code, b)}/", template):
        os.makedirs(os.path.join(code, binary), exist_ok=True)
        shutil.copy2(binary_of(bin_dir, binary), os.path.join(code, binary, "bootstrap"))
    print(template)


if __name__ == "__main__":
    main()
