//! Every `sam deploy` (and `sam sync`) line the README, `docs/` and the CHANGELOG show keeps what
//! its config environment in `samconfig.toml` pins. The SAM CLI does not merge a command line's
//! `--parameter-overrides` into the config environment's `parameter_overrides`: the command
//! line's replace the whole string (aws/aws-sam-cli#2380), and a parameter left out then takes the
//! template's default on a new stack (`WebhookSecretsName` a secret the README never creates,
//! `PaymosEnvironment` `live` on a sandbox stack).

use std::collections::BTreeMap;

/// The parameters no documented deploy may lose: they say which environment a stack applies and
/// which secret verifies it.
const PINNED: [&str; 2] = ["PaymosEnvironment", "WebhookSecretsName"];

fn root() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// README.md, every `docs/*.md` and the CHANGELOG, by path.
fn documents() -> Vec<(String, String)> {
    let mut names = vec!["README.md".to_owned(), "CHANGELOG.md".to_owned()];
    for entry in std::fs::read_dir(root().join("docs")).expect("docs/") {
        let path = entry.expect("a docs/ entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            names.push(format!(
                "docs/{}",
                path.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(root().join(&name)).expect("readable");
            (name, text)
        })
        .collect()
}

/// `Key=Value Key2="a b"` (SAM's shorthand; `ParameterKey=K,ParameterValue=V` too) → a map.
pub(crate) fn overrides(text: &str) -> BTreeMap<String, String> {
    shell_words::split(text)
        .unwrap_or_else(|e| panic!("cannot split the overrides {text:?}: {e}"))
        .iter()
        .filter_map(|pair| {
            if let Some(long) = pair.strip_prefix("ParameterKey=") {
                let (k, v) = long.split_once(",ParameterValue=")?;
                return Some((k.to_owned(), v.to_owned()));
            }
            let (k, v) = pair.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// A config environment's `parameter_overrides` for a command (`deploy`, `sync`): the
/// command's table over the environment's `global` table, as the SAM CLI reads them.
pub(crate) fn configured(
    config: &toml::Table,
    env: &str,
    command: &str,
) -> Option<BTreeMap<String, String>> {
    let table = |section: &str| {
        config
            .get(env)?
            .get(section)?
            .get("parameters")?
            .get("parameter_overrides")?
            .as_str()
            .map(overrides)
    };
    table(command).or_else(|| table("global"))
}

/// What a `sam deploy …` command line deploys with: its config environment (`default` without
/// `--config-env`) and the parameters SAM passes, the command line's overrides replacing the
/// environment's whole string. `None` for an environment samconfig.toml does not have.
fn resolve(config: &toml::Table, args: &[String]) -> (String, Option<BTreeMap<String, String>>) {
    let command = args[1].clone();
    let mut env = "default".to_owned();
    let mut given: Option<BTreeMap<String, String>> = None;
    let mut i = 2;
    while i < args.len() {
        let arg = &args[i];
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let value = || inline.clone().or_else(|| args.get(i + 1).cloned());
        match flag {
            "--config-env" => env = value().unwrap_or_default(),
            "--parameter-overrides" => {
                // Every value up to the next flag belongs to it (SAM takes several).
                let mut values = inline.clone().into_iter().collect::<Vec<_>>();
                let mut j = i + 1;
                while inline.is_none() && j < args.len() && !args[j].starts_with("--") {
                    values.push(args[j].clone());
                    j += 1;
                }
                let given = given.get_or_insert_with(BTreeMap::new);
                for value in &values {
                    given.extend(overrides(value));
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if config.get(&env).is_none() {
        return (env, None);
    }
    let resolved = given.or_else(|| configured(config, &env, &command));
    (env, Some(resolved.unwrap_or_default()))
}

/// The `sam deploy`/`sam sync` command lines of a document: in code blocks (continuations joined,
/// comments dropped) and in inline code spans. A span that is only `--parameter-overrides …`
/// (read as "add this to the deploy above") is returned as a deploy of every config environment.
fn deploy_lines(text: &str, envs: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    let mut prose = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_block = !in_block;
            pending.clear();
            continue;
        }
        if !in_block {
            prose.push_str(line);
            prose.push(' ');
            continue;
        }
        let mut line = trimmed.split(" # ").next().unwrap_or_default().to_owned();
        if !pending.is_empty() {
            line = format!("{pending} {line}");
            pending.clear();
        }
        if let Some(joined) = line.strip_suffix('\\') {
            pending = joined.trim_end().to_owned();
            continue;
        }
        for command in ["sam deploy", "sam sync"] {
            if let Some(at) = line.find(command) {
                let rest = &line[at..];
                let end = rest.find([';', '|', '&', ')']).unwrap_or(rest.len());
                out.push(rest[..end].trim().to_owned());
            }
        }
    }
    for (i, span) in prose.split('`').enumerate() {
        let span = span.split_whitespace().collect::<Vec<_>>().join(" ");
        if i % 2 == 0 {
            continue;
        }
        if span.starts_with("sam deploy") || span.starts_with("sam sync") {
            // `--config-env sandbox|live` names each of them.
            let alternatives = span.split_once("--config-env ").map(|(head, tail)| {
                let (envs, after) = tail.split_once(' ').unwrap_or((tail, ""));
                (head.to_owned(), envs.to_owned(), after.to_owned())
            });
            match alternatives {
                Some((head, envs, after)) if envs.contains('|') => {
                    for env in envs.split('|') {
                        out.push(
                            format!("{head}--config-env {env} {after}")
                                .trim()
                                .to_owned(),
                        );
                    }
                }
                _ => out.push(span),
            }
        } else if span.starts_with("--parameter-overrides") && span.contains('=') {
            for env in envs {
                out.push(format!("sam deploy --config-env {env} {span}"));
            }
        }
    }
    out
}

/// A config environment of samconfig.toml that a `parameter_overrides = "…"` line in a
/// document's TOML block sets, under the `[env.deploy.parameters]` header above it.
pub(crate) fn documented_config_edits(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut in_toml = false;
    let mut env = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_toml = trimmed == "```toml";
            continue;
        }
        if !in_toml {
            continue;
        }
        if let Some(header) = trimmed.strip_prefix('[') {
            env = header.split('.').next().unwrap_or_default().to_owned();
        } else if let Some(value) = trimmed.strip_prefix("parameter_overrides = ") {
            out.push((env.clone(), value.trim_matches('"').to_owned()));
        }
    }
    out
}

pub(crate) fn samconfig() -> toml::Table {
    let text = std::fs::read_to_string(root().join("samconfig.toml")).expect("samconfig.toml");
    text.parse().expect("samconfig.toml parses")
}

/// What a line loses of its config environment's pinned values, if anything.
fn lost(config: &toml::Table, line: &str) -> Option<String> {
    let args = shell_words::split(&line.replace('…', "x"))
        .unwrap_or_else(|e| panic!("cannot split {line:?}: {e}"));
    let (env, resolved) = resolve(config, &args);
    let Some(resolved) = resolved else {
        return Some(format!("config environment {env} is not in samconfig.toml"));
    };
    let pinned = configured(config, &env, "deploy").unwrap_or_default();
    let lost: Vec<String> = PINNED
        .iter()
        .filter(|p| resolved.get(**p) != pinned.get(**p) || !resolved.contains_key(**p))
        .map(|p| {
            format!(
                "{p} (the config environment {env} says {:?}, the line deploys {:?})",
                pinned.get(*p),
                resolved.get(*p)
            )
        })
        .collect();
    (!lost.is_empty()).then(|| lost.join(", "))
}

// Issue 42, item 3: the README said to turn on the reverse check with
// `--parameter-overrides PaymosApiSecretName=…`, which drops the config environment's
// environment and secret name.
#[test]
fn every_documented_deploy_keeps_its_config_environments_environment_and_secret() {
    let config = samconfig();
    let envs: Vec<String> = config
        .iter()
        .filter(|(_, t)| t.get("deploy").is_some())
        .map(|(name, _)| name.clone())
        .collect();
    for env in &envs {
        let pinned = configured(&config, env, "deploy").unwrap_or_default();
        for p in PINNED {
            assert!(
                pinned.contains_key(p),
                "samconfig.toml's {env} config environment sets {p}"
            );
        }
    }
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, text) in documents() {
        for line in deploy_lines(&text, &envs) {
            checked += 1;
            if let Some(lost) = lost(&config, &line) {
                failures.push(format!("{name}: `{line}` loses {lost}"));
            }
        }
        for (env, value) in documented_config_edits(&text) {
            checked += 1;
            let edited = overrides(&value);
            let pinned = configured(&config, &env, "deploy").unwrap_or_default();
            for p in PINNED {
                if !edited.contains_key(p) || edited.get(p) != pinned.get(p) {
                    failures.push(format!(
                        "{name}: the {env} config environment's documented parameter_overrides \
                         loses {p}: {value}"
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "a documented deploy would change what its stack applies:\n{}",
        failures.join("\n")
    );
    assert!(
        checked >= 4,
        "the documents' deploy lines were found ({checked})"
    );
}

#[test]
fn a_bare_parameter_override_is_caught_and_the_whole_string_passes() {
    let config = samconfig();
    let envs = ["sandbox".to_owned(), "live".to_owned()];
    // The README's old sentence: two spans, a deploy and the override to add to it.
    let old = "then `sam deploy --config-env live` and turn on the reverse check \
               (`--parameter-overrides PaymosApiSecretName=…`)";
    let lines = deploy_lines(old, &envs);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lost(&config, &lines[0]).is_none(), "{}", lines[0]);
    for line in &lines[1..] {
        let lost = lost(&config, line).unwrap_or_default();
        assert!(
            lost.contains("PaymosEnvironment") && lost.contains("WebhookSecretsName"),
            "{line}: {lost}"
        );
    }
    let block = "```sh\nsam deploy --config-env sandbox --parameter-overrides \\\n  \
                 PaymosApiSecretName=x   # the reverse check\n```";
    assert!(lost(&config, &deploy_lines(block, &envs)[0]).is_some());
    let whole = "```sh\nsam deploy --config-env sandbox --parameter-overrides \\\n  \
                 \"PaymosEnvironment=sandbox WebhookSecretsName=paymos-inbox/sandbox/webhook-secrets \
                 PaymosApiSecretName=x\"\n```";
    assert!(lost(&config, &deploy_lines(whole, &envs)[0]).is_none());
    // The other environment's values are a mix-up, not a keep.
    let mixed = "`sam deploy --config-env sandbox --parameter-overrides \"PaymosEnvironment=live \
                 WebhookSecretsName=paymos-inbox/live/webhook-secrets\"`";
    assert!(lost(&config, &deploy_lines(mixed, &envs)[0]).is_some());
    assert!(lost(&config, "sam deploy --config-env staging").is_some());
    let edit =
        "```toml\n[live.deploy.parameters]\nparameter_overrides = \"PaymosApiSecretName=x\"\n```";
    assert_eq!(documented_config_edits(edit)[0].0, "live");
}
