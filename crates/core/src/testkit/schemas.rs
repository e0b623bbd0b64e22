//! The hand-off's published contract: the JSON Schema (draft 2020-12) of each detail type in
//! `schemas/v<DETAIL_VERSION>/`, and a check of any published detail against it with the
//! `jsonschema` crate, for every test that publishes.

use serde_json::Value;

use crate::roads::handoff::{DETAIL_VERSION, slug};

/// The schema file of a detail type (by its slug) at `version`.
#[must_use]
pub fn path(version: u64, slug: &str) -> std::path::PathBuf {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("schemas")
        .join(format!("v{version}"))
        .join(format!("{slug}.json"))
}

/// The validator of `detail_type` at the current version.
///
/// # Panics
/// When the schema is missing or not a valid JSON Schema (a defect of the repository).
#[must_use]
pub fn validator(detail_type: &str) -> jsonschema::Validator {
    let file = path(DETAIL_VERSION, &slug(detail_type));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let schema: Value = serde_json::from_str(&text).expect("a schema is JSON");
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

/// Every error of `detail` against the schema of `detail_type`, in words.
#[must_use]
pub fn errors(detail_type: &str, detail: &Value) -> Vec<String> {
    validator(detail_type)
        .iter_errors(detail)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// Panics with every error when `detail` is not valid for `detail_type`.
///
/// # Panics
/// As said: for tests.
pub fn assert_valid(detail_type: &str, detail: &Value) {
    let errors = errors(detail_type, detail);
    assert!(errors.is_empty(), "{detail_type}: {errors:#?}\n{detail}");
}
