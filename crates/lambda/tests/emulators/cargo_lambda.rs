//! Issue 52, the cargo-lambda road: `docs/deploy.md`'s block (*One function, with
//! cargo-lambda*), run by bash as written against moto's CloudFormation and Lambda, puts the
//! built code into the stack's function and leaves the function's name, role, environment and
//! architecture as the stack set them. cargo-lambda (`.venv`, requirements-lambda.txt) and the
//! AWS CLI (`.venv/awscli`, requirements-dev.txt) are the real ones; `make test` installs both.
//!
//! Two stand-ins, each said where it is used: the block's `cargo lambda build` is answered with
//! this machine's debug build (a release arm64 build takes minutes), and moto's CloudFormation
//! drops a function's `Architectures`, so an arm64 function is made through the Lambda API.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::release::{moto_server, root, run};

const STACK: &str = "paymos-inbox-sandbox";

/// A stack as the template makes one, for what the deploy may touch: the function's runtime,
/// handler, memory, timeout, role and environment (moto's CloudFormation takes no SAM
/// transform, and drops `Architectures`).
const STACK_TEMPLATE: &str = r#"{
  "Resources": {
    "FulfilFunctionRole": {
      "Type": "AWS::IAM::Role",
      "Properties": {"AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}}
    },
    "FulfilFunction": {
      "Type": "AWS::Lambda::Function",
      "Properties": {
        "Runtime": "provided.al2023", "Handler": "bootstrap", "MemorySize": 256, "Timeout": 30,
        "Role": {"Fn::GetAtt": ["FulfilFunctionRole", "Arn"]},
        "Code": {"ZipFile": "the code sam deploy uploaded"},
        "Environment": {"Variables": {"PAYMOS_INBOX_STACK": "paymos-inbox-sandbox",
          "STATE_TABLE": "paymos-inbox-sandbox-StateTable-1", "PAYMOS_ENVIRONMENT": "sandbox",
          "WORK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/work"}}
      }
    }
  }
}"#;

/// `cargo` for the block: `cargo lambda build` copies this machine's debug build of `--bin`
/// where cargo-lambda's build puts it (`$CARGO_TARGET_DIR/lambda/<bin>/bootstrap`) and records
/// its arguments; `cargo lambda …` runs cargo-lambda; anything else runs cargo.
const CARGO_SHIM: &str = r#"#!/usr/bin/env bash
set -euo pipefail
if [ "${1:-}" = lambda ] && [ "${2:-}" = build ]; then
  echo "$*" >> "$BUILD_LOG"
  bin=""; prev=""
  for a in "$@"; do [ "$prev" = --bin ] && bin="$a"; prev="$a"; done
  [ -n "$bin" ] || { echo "the stand-in builds one --bin" >&2; exit 2; }
  mkdir -p "$CARGO_TARGET_DIR/lambda/$bin"
  cp "$PREBUILT_DIR/$bin" "$CARGO_TARGET_DIR/lambda/$bin/bootstrap"
elif [ "${1:-}" = lambda ]; then
  exec "$CARGO_LAMBDA" "$@"
else
  exec "$REAL_CARGO" "$@"
fi
"#;

/// The documents' block that runs `cargo lambda deploy`.
fn documented_block() -> String {
    let doc = std::fs::read_to_string(root().join("docs/deploy.md")).unwrap();
    doc.split("```sh\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .find(|block| block.contains("cargo lambda deploy"))
        .expect("docs/deploy.md has a block with `cargo lambda deploy`")
        .to_owned()
}

fn cargo_lambda() -> PathBuf {
    let path = root().join(".venv/bin/cargo-lambda");
    assert!(
        path.exists(),
        "{} is missing: `make test` installs it (make .venv/.lambda, from requirements-lambda.txt)",
        path.display()
    );
    path
}

fn awscli() -> PathBuf {
    let aws = root().join(".venv/awscli/bin/aws");
    assert!(
        aws.exists(),
        "{} is missing: `make test` installs it (make .venv/awscli/.installed)",
        aws.display()
    );
    aws
}

/// The environment every command runs in: moto for every AWS API, test credentials, and none
/// of this machine's AWS profiles.
fn against_moto<'c>(command: &'c mut Command, moto: &str, scratch: &Path) -> &'c mut Command {
    command
        .env("AWS_ENDPOINT_URL", moto)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("AWS_CONFIG_FILE", scratch.join("no-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            scratch.join("no-credentials"),
        )
        .env_remove("AWS_PROFILE")
}

fn aws(moto: &str, scratch: &Path, args: &[&str]) -> Value {
    let out = run(against_moto(
        Command::new(awscli()).args(args).args(["--output", "json"]),
        moto,
        scratch,
    ));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("aws {args:?}: {e}: {out}"))
}

fn configuration(moto: &str, scratch: &Path, name: &str) -> Value {
    aws(
        moto,
        scratch,
        &[
            "lambda",
            "get-function-configuration",
            "--function-name",
            name,
        ],
    )
}

/// What Lambda reports as a zip's `CodeSha256`.
fn code_sha256(zip: &Path) -> String {
    let digest = Sha256::digest(std::fs::read(zip).expect("cargo-lambda's zip"));
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// Runs `script` with bash, against moto, from the repository's top folder (cargo-lambda reads
/// its `Cargo.toml`), with the `cargo` stand-in first on the `PATH`, then the AWS CLI.
fn bash(script: &str, moto: &str, scratch: &Path) -> String {
    let shims = scratch.join("shims");
    std::fs::create_dir_all(&shims).unwrap();
    let cargo = shims.join("cargo");
    std::fs::write(&cargo, CARGO_SHIM).unwrap();
    run(Command::new("chmod").arg("+x").arg(&cargo));
    let path = format!(
        "{}:{}:{}",
        shims.display(),
        awscli().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let prebuilt = Path::new(env!("CARGO_BIN_EXE_paymos-fulfil"))
        .parent()
        .unwrap();
    run(against_moto(
        Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(root())
            .env("PATH", path)
            .env("CARGO_TARGET_DIR", scratch.join("target"))
            .env("BUILD_LOG", scratch.join("build-args"))
            .env("PREBUILT_DIR", prebuilt)
            .env("CARGO_LAMBDA", cargo_lambda())
            .env("REAL_CARGO", env!("CARGO"))
            .env("CARGO_LAMBDA_COLOR", "never"),
        moto,
        scratch,
    ))
}

/// What a deploy must leave as it found it.
fn kept(configuration: &Value) -> Value {
    let mut kept = serde_json::Map::new();
    for field in [
        "FunctionName",
        "Runtime",
        "Handler",
        "Role",
        "MemorySize",
        "Timeout",
        "Environment",
        "Architectures",
    ] {
        kept.insert(field.to_owned(), configuration[field].clone());
    }
    Value::Object(kept)
}

#[test]
fn the_documented_cargo_lambda_deploy_changes_the_stacks_function_code_and_nothing_else() {
    let scratch_dir = paymos_inbox_testkit::scratch("cargo-lambda");
    let scratch = scratch_dir.path();
    let (_moto, moto) = moto_server();
    std::fs::write(scratch.join("stack.json"), STACK_TEMPLATE).unwrap();
    let template_body = format!("file://{}", scratch.join("stack.json").display());
    aws(
        &moto,
        scratch,
        &[
            "cloudformation",
            "create-stack",
            "--stack-name",
            STACK,
            "--template-body",
            &template_body,
        ],
    );
    let physical = |logical: &str| {
        aws(
            &moto,
            scratch,
            &[
                "cloudformation",
                "describe-stack-resource",
                "--stack-name",
                STACK,
                "--logical-resource-id",
                logical,
            ],
        )["StackResourceDetail"]["PhysicalResourceId"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let function = physical("FulfilFunction");
    let role = physical("FulfilFunctionRole");
    let before = configuration(&moto, scratch, &function);
    assert_ne!(function, "FulfilFunction", "the stack names it: {function}");

    let block = documented_block();
    assert!(
        block.contains(&format!("stack={STACK} ")),
        "the block deploys into the sandbox stack:\n{block}"
    );
    let output = bash(&block, &moto, scratch);

    // The build the block asks for is the stack's architecture (template.yaml's Globals).
    let template = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    assert!(template.contains("\n    Architectures: [arm64]\n"));
    let builds = std::fs::read_to_string(scratch.join("build-args")).expect("the block builds");
    assert_eq!(
        builds.trim(),
        "lambda build --release --arm64 --bin paymos-fulfil"
    );

    // The function's code is the zip cargo-lambda made of the build; nothing else changed.
    let after = configuration(&moto, scratch, &function);
    let zip = scratch.join("target/lambda/paymos-fulfil/bootstrap.zip");
    assert_eq!(after["CodeSha256"], code_sha256(&zip), "{output}");
    assert_ne!(after["CodeSha256"], before["CodeSha256"]);
    assert_eq!(kept(&after), kept(&before));
    assert!(
        after["Role"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{role}")),
        "the stack's role: {}",
        after["Role"]
    );
    assert_eq!(
        after["Environment"]["Variables"]["PAYMOS_ENVIRONMENT"],
        "sandbox"
    );
}

// moto's CloudFormation drops `Architectures`, so the stack above made an x86_64 function, as
// this machine's build is. An arm64 function (the template's), made through the Lambda API,
// shows the rule the block's `--arm64` rests on: a deploy never changes the architecture.
#[test]
fn cargo_lambda_deploy_keeps_an_arm64_functions_architecture_whatever_it_uploads() {
    let scratch_dir = paymos_inbox_testkit::scratch("cargo-lambda-arm64");
    let scratch = scratch_dir.path();
    let (_moto, moto) = moto_server();
    let role = aws(
        &moto,
        scratch,
        &[
            "iam",
            "create-role",
            "--role-name",
            "fulfil",
            "--assume-role-policy-document",
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#,
        ],
    )["Role"]["Arn"]
        .as_str()
        .unwrap()
        .to_owned();
    run(Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; zipfile.ZipFile(sys.argv[1], 'w').writestr('bootstrap', 'old')",
        ])
        .arg(scratch.join("old.zip")));
    let old_zip = format!("fileb://{}", scratch.join("old.zip").display());
    let created = aws(
        &moto,
        scratch,
        &[
            "lambda",
            "create-function",
            "--function-name",
            "paymos-inbox-sandbox-FulfilFunction-ARM",
            "--runtime",
            "provided.al2023",
            "--handler",
            "bootstrap",
            "--architectures",
            "arm64",
            "--role",
            &role,
            "--zip-file",
            &old_zip,
        ],
    );
    assert_eq!(created["Architectures"], serde_json::json!(["arm64"]));
    let block = documented_block();
    let deploy = block
        .lines()
        .find(|l| l.starts_with("cargo lambda deploy"))
        .expect("the block's deploy line");
    let build = block
        .lines()
        .find(|l| l.starts_with("cargo lambda build"))
        .expect("the block's build line");
    bash(
        &format!("name=paymos-inbox-sandbox-FulfilFunction-ARM\n{build}\n{deploy}\n"),
        &moto,
        scratch,
    );
    let after = configuration(&moto, scratch, "paymos-inbox-sandbox-FulfilFunction-ARM");
    let zip = scratch.join("target/lambda/paymos-fulfil/bootstrap.zip");
    assert_eq!(after["CodeSha256"], code_sha256(&zip), "the new code");
    assert_eq!(
        after["Architectures"],
        serde_json::json!(["arm64"]),
        "a deploy of this machine's {} build left the function arm64",
        std::env::consts::ARCH
    );
}
