//! The stack's template, built into the command line (`dev` and the tests create tables and
//! queues from it): `template.yaml` at the repository's root when building from a clone (on
//! every system, Windows' checkouts of symlinks included), else the package's own copy (the
//! `template.yaml` symlink here, which `cargo package` follows), as a crates.io build has it.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.join("../../template.yaml");
    let from = if root.is_file() {
        root
    } else {
        manifest.join("template.yaml")
    };
    println!("cargo::rerun-if-changed={}", from.display());
    let to =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo")).join("template.yaml");
    std::fs::copy(&from, &to)
        .unwrap_or_else(|e| panic!("the stack's template {}: {e}", from.display()));
}
