#!/usr/bin/env python3
"""Writes the template `sam local invoke` runs with host-built binaries: template.yaml with each
function's CodeUri a folder holding its binary as `bootstrap`, and the host's architecture.

    scripts/sam-local-template.py BIN_DIR ARCH OUT_DIR [--trust CA_PEM]

BIN_DIR holds the binaries cargo built (`target/debug` or `target/release`), ARCH is `x86_64`
or `arm64`. The template is derived as the release's is (scripts/release.py); the functions'
`Metadata` (cargo-lambda's build) stays: `sam local invoke` reads only the code folder.

The Globals' `Layers` (the ADOT collector, only with `AdotLayerArn`) is left out: SAM CLI reads a
function's layers before it resolves conditions, and fetches every layer from AWS, which a local
run has no account for; with the default (no `AdotLayerArn`) the stack has no layer either.

`--trust CA_PEM` is for a local HTTPS endpoint standing in for the merchant's (the hand-off's
tests): the certificate authority is copied beside each bootstrap and named by `SSL_CERT_FILE`,
the variable the functions' TLS roots are read from, instead of the image's bundle. Without it
the template declares nothing more than template.yaml does.
"""
import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from release import binary_of, derive_template  # noqa: E402

GLOBALS_FIRST_VARIABLE = "        PAYMOS_INBOX_STACK: !Ref AWS::StackName\n"
GLOBALS_LAYERS = "    Layers: !If [HasAdotLayer, [!Ref AdotLayerArn], !Ref AWS::NoValue]\n"


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("bin_dir")
    args.add_argument("arch", choices=["arm64", "x86_64"])
    args.add_argument("out")
    args.add_argument("--trust", metavar="CA_PEM")
    a = args.parse_args()
    code = os.path.join(os.path.abspath(a.out), "code")
    template = os.path.join(a.out, "template.yaml")
    os.makedirs(a.out, exist_ok=True)
    for binary in derive_template(a.arch, lambda b: f"{os.path.join(code, b)}/", template):
        os.makedirs(os.path.join(code, binary), exist_ok=True)
        shutil.copy2(binary_of(a.bin_dir, binary), os.path.join(code, binary, "bootstrap"))
        if a.trust:
            shutil.copy2(a.trust, os.path.join(code, binary, "local-ca.pem"))
    text = open(template, encoding="utf-8").read()
    if text.count(GLOBALS_LAYERS) != 1:
        sys.exit("template.yaml's Globals no longer name the ADOT layer as this script expects")
    text = text.replace(GLOBALS_LAYERS, "")
    if a.trust:
        if text.count(GLOBALS_FIRST_VARIABLE) != 1:
            sys.exit("template.yaml's Globals no longer start their variables with PAYMOS_INBOX_STACK")
        # /var/task is where Lambda (and SAM) put the code folder.
        text = text.replace(
            GLOBALS_FIRST_VARIABLE,
            GLOBALS_FIRST_VARIABLE + "        SSL_CERT_FILE: /var/task/local-ca.pem\n",
        )
    open(template, "w", encoding="utf-8").write(text)
    print(template)


if __name__ == "__main__":
    main()
