//! The Standard Webhooks reference implementations we did not write (`standardwebhooks` from
//! PyPI in `.venv` and from npm in `node_modules`), which judge every signed hand-off.

use std::sync::{Arc, Mutex};

use serde_json::json;

/// What a loopback receiver got: the headers and body of each request.
pub type Received = Arc<Mutex<Vec<(Vec<(String, String)>, String)>>>;

/// Whether the Standard Webhooks reference implementations of two languages (`standardwebhooks`
/// from PyPI and from npm) verify `body` with `headers` and `secret`: `Ok` when both do, `Err`
/// with both answers when both refuse. They must agree.
pub fn verifies_with(secret: &str, headers: &[(String, String)], body: &str) -> Result<(), String> {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let python = root.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `make deps` (it installs standardwebhooks from requirements-dev.txt)",
        python.display()
    );
    assert!(
        root.join("node_modules/standardwebhooks").exists(),
        "node_modules/standardwebhooks is missing: run `make deps` (npm ci)"
    );
    let input = json!({"secret": secret, "body": body,
        "headers": headers.iter().cloned().collect::<std::collections::HashMap<_, _>>()});
    let python_script = "import json, sys\nfrom standardwebhooks.webhooks import Webhook\nd = json.load(sys.stdin)\nWebhook(d['secret']).verify(d['body'], d['headers'])\n";
    let node_script = "const { Webhook } = require('standardwebhooks'); const d = JSON.parse(require('fs').readFileSync(0, 'utf8')); new Webhook(d.secret).verify(d.body, d.headers);";
    let run = |program: &std::path::Path, args: [&str; 2]| {
        let mut child = std::process::Command::new(program)
            .args(args)
            .current_dir(root)
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        out.status
            .success()
            .then_some(())
            .ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let pypi = run(&python, ["-c", python_script]);
    let npm = run(std::path::Path::new("node"), ["-e", node_script]);
    match (pypi, npm) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(p), Err(n)) => Err(format!("PyPI: {p}\nnpm: {n}")),
        (p, n) => panic!("the two reference implementations disagree: PyPI {p:?}, npm {n:?}"),
    }
}
