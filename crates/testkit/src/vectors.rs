//! The 69 official Paymos signature vectors, copied from the provider's reference into
//! `fixtures/` so a fresh clone needs nothing beside it.

/// One vector: a secret, a header, a raw body and the verdict Paymos expects.
#[derive(serde::Deserialize)]
pub struct Vector {
    pub name: String,
    pub secret: String,
    pub now: u64,
    pub tolerance_seconds: u64,
    pub header: String,
    pub raw_body: String,
    pub expect_valid: bool,
    pub expect_error: Option<String>,
    #[serde(default)]
    pub expect_envelope_valid: Option<bool>,
}

/// Every vector, checked to be the 69 the file says it holds.
pub fn vectors() -> Vec<Vector> {
    #[derive(serde::Deserialize)]
    struct File {
        count: usize,
        vectors: Vec<Vector>,
    }
    let text = include_str!("../fixtures/paymos-webhook-vectors.json");
    let file: File = serde_json::from_str(text).expect("vectors parse");
    assert_eq!(file.vectors.len(), file.count);
    assert_eq!(file.count, 69);
    file.vectors
}
