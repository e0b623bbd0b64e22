//! Issue 52: every command the README's code blocks show is run by a test, or checked by a
//! stated rule where it needs AWS. [`Rule`] names, for each kind of command, what runs or
//! checks it; a command no rule takes (a new one), or a block in a language this file does
//! not read, fails `every_readme_command_is_run_or_checked`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use paymos_inbox_testkit::moto::Moto;
use paymos_inbox_testkit::scratch;
use tokio::io::AsyncBufReadExt as _;

use crate::deploy_lines::{configured, documented_config_edits, overrides, samconfig};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md")
}

/// What runs or checks a kind of README command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rule {
    /// `cargo run … -p paymos-inbox -- …`: run with the built binary in a folder that holds a
    /// running `dev`'s `dev.json`, as the quick start runs it.
    Dev,
    /// `paymos-inbox … --config-env E` (a deployed stack): the CLI's own parser takes it and
    /// E is samconfig.toml's; what each command does is its emulator test's.
    Stack,
    /// `make …`: `make -n` takes it, and each `paymos-inbox` command it would run parses.
    Make,
    /// `aws …` (alone or as `x="$(aws …)"`), and a secret block's file steps
    /// (`(umask 077 && cat > f)`, `rm f`): run by bash, block by block, against moto.
    Aws,
    /// `sam deploy --config-env E`: E's parameters name the template's parameters and meet
    /// their constraints and rules; and the line keeps what E pins (`deploy_lines`).
    SamDeploy,
    /// `read -rsp 'prompt' VAR`: bash sets VAR from its input; a later line of the block uses it.
    Read,
    /// `cargo install …`: the one install line, naming the workspace's repository.
    Install,
    /// `sha256sum -c SHA256SUMS`: run in a release folder as `make release` packs it.
    ReleaseSums,
}

impl Rule {
    /// The test that runs or checks the rule's commands: its file and function.
    fn checked_by(self) -> (&'static str, &'static str) {
        match self {
            Rule::Dev => (
                "crates/cli/tests/it/readme.rs",
                "the_readmes_local_commands_run_against_dev",
            ),
            Rule::Stack => (
                "crates/cli/src/bin/paymos-inbox/doc_commands.rs",
                "every_documented_command_line_parses",
            ),
            Rule::Make => (
                "crates/cli/src/bin/paymos-inbox/doc_commands.rs",
                "every_readme_make_line_runs_commands_the_cli_parses",
            ),
            Rule::Aws => (
                "crates/cli/tests/it/readme.rs",
                "the_readmes_aws_commands_run_against_moto",
            ),
            Rule::SamDeploy => (
                "crates/cli/tests/it/readme.rs",
                "every_readme_deploy_passes_parameters_the_template_accepts",
            ),
            Rule::Read => (
                "crates/cli/tests/it/readme.rs",
                "every_readme_read_sets_a_variable_a_later_line_uses",
            ),
            Rule::Install => (
                "crates/cli/src/bin/paymos-inbox/doc_commands.rs",
                "there_is_one_install_line_and_it_names_the_repository",
            ),
            Rule::ReleaseSums => (
                "crates/lambda/tests/emulators/release.rs",
                "the_release_deploys_the_binaries_it_sums_with_the_template_as_it_is",
            ),
        }
    }
}

/// The rule for a command, if one takes it.
fn rule_of(command: &str) -> Option<Rule> {
    let assigned_aws = command.split_once("=\"$(aws ").is_some_and(|(name, rest)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && rest.ends_with(")\"")
    });
    Some(match command {
        c if c.starts_with("cargo run ") && c.contains(" -p paymos-inbox -- ") => {
            if c.contains("--config-env") {
                return None;
            }
            Rule::Dev
        }
        c if c.starts_with("paymos-inbox ") && c.contains(" --config-env ") => Rule::Stack,
        c if c.starts_with("make ") => Rule::Make,
        c if c.starts_with("aws ") || assigned_aws => Rule::Aws,
        c if c.starts_with("(umask 077 && cat > ") || c.starts_with("rm ") => Rule::Aws,
        c if c.starts_with("sam deploy ") => Rule::SamDeploy,
        c if c.starts_with("read -rsp ") => Rule::Read,
        c if c.starts_with("cargo install ") => Rule::Install,
        c if c.starts_with("sha256sum -c ") => Rule::ReleaseSums,
        _ => return None,
    })
}

/// A README code block: its language and its commands (continuations joined, prompts, output
/// and comments dropped).
struct Block {
    language: String,
    commands: Vec<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    let mut open = false;
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(language) = trimmed.strip_prefix("```") {
            if !open {
                out.push(Block {
                    language: language.to_owned(),
                    commands: Vec::new(),
                });
            }
            open = !open;
            pending.clear();
            continue;
        }
        let Some(block) = out.last_mut().filter(|_| open) else {
            continue;
        };
        if block.language != "sh" || trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut line = trimmed.strip_prefix("$ ").unwrap_or(trimmed).to_owned();
        if let Some((command, _comment)) = line.split_once(" # ") {
            line = command.trim_end().to_owned();
        }
        if !pending.is_empty() {
            line = format!("{pending} {line}");
            pending.clear();
        }
        if let Some(joined) = line.strip_suffix('\\') {
            pending = joined.trim_end().to_owned();
            continue;
        }
        block.commands.push(line);
    }
    out
}

#[test]
fn every_readme_command_is_run_or_checked() {
    let mut by_rule: BTreeMap<Rule, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for block in blocks(&readme()) {
        match block.language.as_str() {
            // The picture, and samconfig.toml's lines (deploy_lines checks what they pin,
            // every_readme_deploy_… what they pass).
            "text" | "toml" => continue,
            "sh" => {}
            other => failures.push(format!("a ```{other} block: no rule reads it")),
        }
        for command in block.commands {
            match rule_of(&command) {
                Some(rule) => *by_rule.entry(rule).or_default() += 1,
                None => failures.push(format!("no test runs or checks: {command}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for (rule, count) in &by_rule {
        let (file, test) = rule.checked_by();
        let source = std::fs::read_to_string(root().join(file)).expect(file);
        assert!(
            source.contains(&format!("fn {test}()")),
            "{rule:?} ({count} commands) names {file}'s {test}, which is not there"
        );
    }
    assert!(
        by_rule.values().sum::<usize>() >= 20,
        "the README's commands were found: {by_rule:?}"
    );
}

#[test]
fn a_new_command_with_no_rule_fails_the_check() {
    let text = "```sh\nmake dev   # the pipeline\npaymos-inbox status \\\n  --config-env live\ncurl -X POST \"$url\"\n```\n```bash\nls\n```\n";
    let found = blocks(text);
    assert_eq!(
        found[0].commands,
        [
            "make dev",
            "paymos-inbox status --config-env live",
            "curl -X POST \"$url\""
        ]
    );
    assert_eq!(rule_of(&found[0].commands[0]), Some(Rule::Make));
    assert_eq!(rule_of(&found[0].commands[1]), Some(Rule::Stack));
    assert_eq!(rule_of(&found[0].commands[2]), None);
    assert_eq!(found[1].language, "bash");
    assert_eq!(
        rule_of("url=\"$(aws cloudformation describe-stacks --stack-name s)\""),
        Some(Rule::Aws)
    );
    assert_eq!(rule_of("paymos-inbox exceptions"), None, "no stack, no dev");
    assert_eq!(
        rule_of("cargo run -q -p paymos-inbox -- exceptions --config-env live"),
        None
    );
}

#[test]
fn every_readme_read_sets_a_variable_a_later_line_uses() {
    let mut checked = 0;
    for block in blocks(&readme()) {
        for (at, command) in block.commands.iter().enumerate() {
            if rule_of(command) != Some(Rule::Read) {
                continue;
            }
            let variable = command.split_whitespace().last().unwrap();
            let script = format!("{command}; printf '%s' \"${variable}\"");
            let mut child = std::process::Command::new("bash")
                .args(["-euo", "pipefail", "-c", &script])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("bash");
            use std::io::Write as _;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"whsec_test_typed\n")
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{command}");
            assert_eq!(String::from_utf8_lossy(&out.stdout), "whsec_test_typed");
            assert!(
                !String::from_utf8_lossy(&out.stderr).contains("whsec_test_typed"),
                "{command}: the secret is not echoed"
            );
            assert!(
                block.commands[at + 1..]
                    .iter()
                    .any(|later| later.contains(&format!("${variable}"))),
                "{command}: no later line of its block uses ${variable}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 3, "the README's reads ({checked})");
}

/// What keeps the template from taking `parameters`: each problem in a sentence.
fn refused_parameters(parameters: &BTreeMap<String, String>) -> Vec<String> {
    let template: yaml_serde::Value =
        yaml_serde::from_str(&std::fs::read_to_string(root().join("template.yaml")).unwrap())
            .expect("template.yaml parses");
    let mut refused = Vec::new();
    for (name, value) in parameters {
        let declared = &template["Parameters"][name.as_str()];
        if declared.is_null() {
            refused.push(format!("{name}: not a parameter of template.yaml"));
            continue;
        }
        if let Some(pattern) = declared["AllowedPattern"].as_str() {
            let whole = regex::Regex::new(&format!("^(?:{pattern})$")).expect(pattern);
            if !whole.is_match(value) {
                refused.push(format!("{name}={value}: not {pattern}"));
            }
        }
        if let Some(allowed) = declared["AllowedValues"].as_sequence() {
            let allowed: Vec<String> = allowed
                .iter()
                .map(|v| match v {
                    yaml_serde::Value::String(s) => s.clone(),
                    other => yaml_serde::to_string(other).unwrap().trim().to_owned(),
                })
                .collect();
            if !allowed.contains(value) {
                refused.push(format!("{name}={value}: not one of {allowed:?}"));
            }
        }
        for (bound, holds) in [
            (
                "MinValue",
                (|v: f64, b: f64| v >= b) as fn(f64, f64) -> bool,
            ),
            ("MaxValue", |v, b| v <= b),
        ] {
            if let Some(b) = declared[bound].as_f64() {
                match value.parse::<f64>() {
                    Ok(v) if holds(v, b) => {}
                    _ => refused.push(format!("{name}={value}: {bound} {b}")),
                }
            }
        }
    }
    // The template's one rule: a live stack names its projects.
    if parameters.get("PaymosEnvironment").map(String::as_str) == Some("live")
        && parameters
            .get("PaymosProjectIds")
            .is_none_or(String::is_empty)
    {
        refused.push("LiveStackNamesItsProjects: a live stack sets PaymosProjectIds".to_owned());
    }
    refused
}

#[test]
fn every_readme_deploy_passes_parameters_the_template_accepts() {
    let config = samconfig();
    let text = readme();
    // The README's edits of samconfig.toml's lines come first: its deploys run after them.
    let mut edited: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (env, value) in documented_config_edits(&text) {
        edited.insert(env, overrides(&value.replace('…', "x")));
    }
    let mut checked = 0;
    let mut failures = Vec::new();
    for block in blocks(&text) {
        for command in block.commands {
            if rule_of(&command) != Some(Rule::SamDeploy) {
                continue;
            }
            let words = shell_words::split(&command).unwrap();
            let env = words
                .windows(2)
                .find(|w| w[0] == "--config-env")
                .map(|w| w[1].clone())
                .unwrap_or_else(|| panic!("{command}: a deploy names its config environment"));
            assert!(
                !command.contains("--parameter-overrides"),
                "{command}: the parameters are samconfig.toml's (deploy_lines)"
            );
            let parameters = edited
                .get(&env)
                .cloned()
                .or_else(|| configured(&config, &env, "deploy"))
                .unwrap_or_else(|| panic!("{command}: no {env} in samconfig.toml"));
            for problem in refused_parameters(&parameters) {
                failures.push(format!("{command}: {problem}"));
            }
            checked += 1;
        }
    }
    for (env, parameters) in &edited {
        for problem in refused_parameters(parameters) {
            failures.push(format!("the README's {env} line: {problem}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 2, "the README's deploys ({checked})");
    let wrong: BTreeMap<String, String> = [
        ("PaymosEnvironment", "live"),
        ("SweepRate", "rate(1 minutes)"),
        (
            "WebhookSecretsName",
            "arn:aws:secretsmanager:eu-west-1:1:secret:x",
        ),
        ("MaxBodyBytes", "196608"),
        ("Nonexistent", "x"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(
        refused_parameters(&wrong).len(),
        5,
        "{:?}",
        refused_parameters(&wrong)
    );
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

/// A bash script against moto, in `dir`, with `input` on its standard input: stdout.
async fn bash_against_moto(script: &str, moto: &Moto, dir: &Path, input: &str) -> String {
    use tokio::io::AsyncWriteExt as _;
    let path = format!(
        "{}:{}",
        awscli().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = tokio::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .env("AWS_ENDPOINT_URL", &moto.url)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_DEFAULT_REGION", "eu-west-1")
        .env("AWS_CONFIG_FILE", dir.join("no-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
        .env_remove("AWS_PROFILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "{script}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_aws_commands_run_against_moto() {
    let moto = Moto::start().await;
    let dir = scratch("readme-aws");
    let config = samconfig();
    let stack = config["sandbox"]["global"]["parameters"]["stack_name"]
        .as_str()
        .unwrap();
    let secret_name =
        configured(&config, "sandbox", "deploy").unwrap()["WebhookSecretsName"].clone();
    // A stack with the template's `WebhookUrl` output, as `sam deploy --config-env sandbox`
    // leaves one.
    let template = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    assert!(template.contains("\nOutputs:\n  WebhookUrl:\n"));
    let webhook_url = "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws/";
    let stack_template = serde_json::json!({
        "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {"WebhookUrl": {"Value": webhook_url}}
    });
    std::fs::write(dir.path().join("stack.json"), stack_template.to_string()).unwrap();
    bash_against_moto(
        &format!(
            "aws cloudformation create-stack --stack-name {stack} --template-body file://stack.json"
        ),
        &moto,
        dir.path(),
        "",
    )
    .await;

    let pasted = r#"{"test":"whsec_test_pasted"}"#;
    let mut ran = Vec::new();
    let mut printed = String::new();
    for block in blocks(&readme()) {
        let lines: Vec<&String> = block
            .commands
            .iter()
            .filter(|c| rule_of(c) == Some(Rule::Aws))
            .collect();
        if lines.is_empty() {
            continue;
        }
        // Each block's AWS lines in order, then what they assigned.
        let mut script: Vec<String> = lines.iter().map(|l| (*l).clone()).collect();
        for line in &lines {
            if let Some((name, _)) = line.split_once("=\"$(aws ") {
                script.push(format!("printf '{name}=%s\\n' \"${name}\""));
            }
        }
        printed.push_str(&bash_against_moto(&script.join("\n"), &moto, dir.path(), pasted).await);
        ran.extend(lines.into_iter().cloned());
    }
    assert!(ran.len() >= 6, "the README's AWS lines: {ran:?}");

    let aws = |args: &'static [&'static str]| {
        let script = format!("aws {} --output json", args.join(" "));
        let moto = &moto;
        let dir = dir.path().to_owned();
        async move {
            let out = bash_against_moto(&script, moto, &dir, "").await;
            serde_json::from_str::<serde_json::Value>(&out).unwrap()
        }
    };
    // The secret block: the pasted text is the secret samconfig.toml's sandbox stack reads,
    // and the file is gone.
    let secret = bash_against_moto(
        &format!("aws secretsmanager get-secret-value --secret-id {secret_name} --query SecretString --output text"),
        &moto,
        dir.path(),
        "",
    )
    .await;
    assert_eq!(secret.trim(), pasted);
    assert!(!dir.path().join("secret.json").exists(), "rm ran");
    // The deploy block's `url=…`: the stack's WebhookUrl.
    assert!(
        printed.contains(&format!("url={webhook_url}\n")),
        "{printed}"
    );
    // The alarms' topic: its ARN is the one the README then writes into samconfig.toml, and
    // it has the e-mail subscription.
    let topic = "arn:aws:sns:eu-west-1:123456789012:paymos-inbox-alarms";
    assert!(printed.contains(&format!("{topic}\n")), "{printed}");
    assert!(readme().contains(&format!("AlarmTopicArn={topic}")));
    let subscriptions = aws(&["sns", "list-subscriptions"]).await;
    let subscribed = subscriptions["Subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| {
            s["TopicArn"] == topic
                && s["Protocol"] == "email"
                && s["Endpoint"] == "oncall@example.com"
        });
    assert!(subscribed, "{subscriptions}");
}

#[tokio::test]
async fn the_readmes_local_commands_run_against_dev() {
    let dev = crate::tools::dev(None).await;
    let dir = scratch("readme-dev");
    std::fs::write(
        dir.path().join("dev.json"),
        serde_json::to_string(&dev.info).unwrap(),
    )
    .unwrap();
    // A desktop's browser: it records the URL it is asked to open.
    let stubs = dir.path().join("stubs");
    std::fs::create_dir_all(&stubs).unwrap();
    let opened = dir.path().join("opened");
    for opener in ["xdg-open", "open"] {
        let stub = stubs.join(opener);
        std::fs::write(
            &stub,
            format!("#!/bin/sh\nprintf '%s' \"$1\" > '{}'\n", opened.display()),
        )
        .unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&stub)
            .status()
            .unwrap();
    }
    let path = format!(
        "{}:{}",
        stubs.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for block in blocks(&readme()) {
        for command in block.commands {
            if rule_of(&command) != Some(Rule::Dev) {
                continue;
            }
            let args = shell_words::split(command.split_once(" -- ").unwrap().1).unwrap();
            let mut cli = tokio::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"));
            cli.args(&args)
                .current_dir(dir.path())
                .env("PATH", &path)
                .env_remove("PAYMOS_WEBHOOK_SECRET")
                .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
                .env_remove("AWS_ENDPOINT_URL_SQS")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            match args[0].as_str() {
                "send" => {
                    let out = tokio::time::timeout(Duration::from_secs(60), cli.output())
                        .await
                        .expect("send ends")
                        .unwrap();
                    let stdout = String::from_utf8_lossy(&out.stdout);
                    assert!(out.status.success(), "{command}: {stdout}");
                    let answers: Vec<&str> = stdout.lines().filter(|l| l.contains(" → ")).collect();
                    let endpoints = args
                        .windows(2)
                        .find(|w| w[0] == "--endpoints")
                        .map_or(1, |w| w[1].parse().unwrap());
                    assert_eq!(answers.len(), endpoints, "{command}: {stdout}");
                    assert!(
                        answers.iter().all(|a| a.contains(" → 200 ")),
                        "{command}: {stdout}"
                    );
                }
                "console" => {
                    let mut console = cli.spawn().expect("console starts");
                    let mut lines =
                        tokio::io::BufReader::new(console.stdout.take().unwrap()).lines();
                    let login = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
                        .await
                        .expect("the console prints its URL")
                        .unwrap()
                        .expect("a URL line");
                    let mut asked = String::new();
                    for _ in 0..100 {
                        asked = std::fs::read_to_string(&opened).unwrap_or_default();
                        if !asked.is_empty() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    assert_eq!(asked, login, "{command}: --open opens the login URL");
                    let visit = reqwest::Client::builder()
                        .redirect(reqwest::redirect::Policy::none())
                        .build()
                        .unwrap()
                        .get(&login)
                        .send()
                        .await
                        .unwrap();
                    assert!(
                        visit.status().is_success() || visit.status().is_redirection(),
                        "{command}: the first visit logs in: {}",
                        visit.status()
                    );
                    console.kill().await.ok();
                }
                other => panic!("{command}: no runner for `{other}` against dev"),
            }
            ran += 1;
        }
    }
    assert!(ran >= 3, "the README's local commands ({ran})");
}
