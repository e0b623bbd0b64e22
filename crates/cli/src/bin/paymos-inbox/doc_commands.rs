//! Every `paymos-inbox …` command line in the README, `docs/` and every `--help`'s examples
//! parses with the CLI's own parser, so a renamed or removed flag fails the build instead of a
//! merchant's first try (an example's stated exit code: `crates/cli/tests/it/cli.rs`).

use clap::{FromArgMatches as _, Parser};

use crate::Cli;

/// The documents, by path from the crate root: the README, `docs/`, and the CHANGELOG's
/// upgrade checklist (the rest of the CHANGELOG is history, in the words of its time).
fn documents() -> Vec<(String, String)> {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let changelog = std::fs::read_to_string(root.join("CHANGELOG.md")).expect("CHANGELOG.md");
    let upgrading = changelog
        .split("### Upgrading")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .expect("the CHANGELOG has an Upgrading checklist");
    let mut out = vec![
        (
            "README.md".to_owned(),
            std::fs::read_to_string(root.join("README.md")).expect("README.md"),
        ),
        ("CHANGELOG.md, Upgrading".to_owned(), upgrading.to_owned()),
    ];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("a docs/ entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
            out.push((name, std::fs::read_to_string(&path).expect("readable")));
        }
    }
    out
}

/// A documented command line, and whether it is a whole command (a code block) or a reference
/// in prose (an inline span, where a required value may be left to the reader).
type Command = (String, bool);

/// Command lines: in code blocks (continuations joined, prompts and comments dropped), and in
/// inline code spans of the prose (also across line breaks) that name no `[optional]` or `a|b`
/// notation.
fn commands(text: &str) -> Vec<Command> {
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
        let mut line = trimmed.strip_prefix("$ ").unwrap_or(trimmed).to_owned();
        if !pending.is_empty() {
            line = format!("{pending} {line}");
            pending.clear();
        }
        if let Some(joined) = line.strip_suffix('\\') {
            pending = joined.trim_end().to_owned();
            continue;
        }
        if let Some(at) = line.find("paymos-inbox ")
            && (at == 0 || line[..at].ends_with("-- ") || line[..at].trim().is_empty())
        {
            let command = line[at..].split(" # ").next().unwrap_or_default();
            out.push((command.trim().to_owned(), true));
        }
    }
    for (i, span) in prose.split('`').enumerate() {
        if i % 2 == 1
            && span.starts_with("paymos-inbox ")
            && !span.contains('[')
            && !span.contains('|')
            && !span.contains('…')
        {
            out.push((span.split_whitespace().collect::<Vec<_>>().join(" "), false));
        }
    }
    out
}

#[test]
fn every_documented_command_line_parses() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, text) in documents() {
        for (command, whole) in commands(&text) {
            // Shell substitutions stand for a value.
            let command = command.replace("\"$url\"", "https://x.example/");
            let Ok(args) = shell_words::split(&command) else {
                failures.push(format!("{name}: cannot split: {command}"));
                continue;
            };
            checked += 1;
            if let Err(e) = Cli::try_parse_from(&args) {
                let reference = !whole
                    && matches!(
                        e.kind(),
                        clap::error::ErrorKind::MissingRequiredArgument
                            | clap::error::ErrorKind::MissingSubcommand
                            | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                    );
                if reference
                    || matches!(
                        e.kind(),
                        clap::error::ErrorKind::DisplayHelp
                            | clap::error::ErrorKind::DisplayVersion
                    )
                {
                    continue;
                }
                failures.push(format!(
                    "{name}: {command}\n  {}",
                    e.to_string().lines().next().unwrap_or_default()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} documented command(s) do not parse:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        checked >= 20,
        "the documents' commands were found ({checked})"
    );
}

/// The `make …` lines of a document's code blocks (continuations joined, comments dropped).
fn make_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_block = !in_block;
            pending.clear();
            continue;
        }
        if !in_block {
            continue;
        }
        let mut line = trimmed
            .split(" # ")
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned();
        if !pending.is_empty() {
            line = format!("{pending} {line}");
            pending.clear();
        }
        if let Some(joined) = line.strip_suffix('\\') {
            pending = joined.trim_end().to_owned();
        } else if line.starts_with("make ") {
            out.push(line);
        }
    }
    out
}

// Every command the README shows is run or checked (crates/cli/tests/it/readme.rs
// names the rule for each). A `make …` line: `make -n` takes it (the target exists, its
// variables pass), and each `paymos-inbox` command it would run parses with the CLI's parser
// (`make dev DEV_ARGS="…"` hands its options to `paymos-inbox dev`). The secrets a block reads
// first (`read -rsp … API_SECRET`) are given as values.
#[test]
fn every_readme_make_line_runs_commands_the_cli_parses() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let lines = make_lines(&readme);
    assert!(lines.len() >= 3, "the README's make lines: {lines:?}");
    let mut parsed = 0;
    let mut failures = Vec::new();
    for line in &lines {
        let out = std::process::Command::new("bash")
            .args([
                "-c",
                &format!("make -n --no-print-directory {}", &line[5..]),
            ])
            .current_dir(root)
            .env("API_SECRET", "sk_test_x")
            .env("WEBHOOK_SECRET", "whsec_test_x")
            .env_remove("MAKEFLAGS")
            .output()
            .expect("make runs");
        if !out.status.success() {
            failures.push(format!(
                "{line}: make -n refuses it: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            continue;
        }
        for command in String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(" -p paymos-inbox -- ").map(|(_, args)| args))
        {
            let command = format!("paymos-inbox {}", command.replace('…', "x"));
            match shell_words::split(&command).map(|args| Cli::try_parse_from(&args)) {
                Ok(Ok(_)) => parsed += 1,
                Ok(Err(e)) => failures.push(format!(
                    "{line}: runs `{command}`, which does not parse: {}",
                    e.to_string().lines().next().unwrap_or_default()
                )),
                Err(e) => failures.push(format!("{line}: cannot split `{command}`: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(parsed >= 2, "make dev runs `paymos-inbox dev` ({parsed})");
    assert_eq!(
        make_lines(
            "```sh\nmake dev DEV_ARGS=\"--slow 11\" \\\n  FORWARD_TO=x   # why\n```\nmake prose"
        ),
        ["make dev DEV_ARGS=\"--slow 11\" FORWARD_TO=x"]
    );
}

#[test]
fn a_renamed_flag_fails_the_check() {
    let parse = |line: &str| Cli::try_parse_from(shell_words::split(line).unwrap()).is_ok();
    assert!(parse(
        "paymos-inbox release inv_1 --actor alice --reason why --override-amount"
    ));
    assert!(!parse(
        "paymos-inbox release inv_1 --actor alice --override"
    ));
    let found = commands(
        "```sh\npaymos-inbox exceptions \\\n  --stack-name s   # note\n```\nand `paymos-inbox pending --json` and `paymos-inbox reconcile [--apply]`",
    );
    assert_eq!(
        found,
        [
            ("paymos-inbox exceptions --stack-name s".to_owned(), true),
            ("paymos-inbox pending --json".to_owned(), false)
        ]
    );
}

/// Every command, nested ones by their path (`events tail`), with its built help.
fn leaves() -> Vec<(String, clap::Command)> {
    fn walk(prefix: &str, command: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
        for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = format!("{prefix} {}", sub.get_name()).trim().to_owned();
            if sub.has_subcommands() {
                walk(&path, sub, out);
            } else {
                out.push((path, sub.clone()));
            }
        }
    }
    let mut out = Vec::new();
    let mut root = crate::command_line();
    root.build();
    walk("", &root, &mut out);
    out
}

// The top-level list was a wall of text (12 lines over 110 characters) and 10 of 19
// commands showed no example.
#[test]
fn the_top_level_list_is_one_short_line_per_command() {
    let help = crate::command_line().render_help().to_string();
    let long: Vec<&str> = help.lines().filter(|l| l.chars().count() > 100).collect();
    assert!(
        long.is_empty(),
        "lines over 100 characters:\n{}",
        long.join("\n")
    );
    let listed = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .count();
    let commands = crate::command_line().get_subcommands().count() + 1; // and `help`
    assert_eq!(listed, commands, "one line per command:\n{help}");
}

#[test]
fn every_command_shows_an_example_of_itself_and_the_exit_codes() {
    let mut failures = Vec::new();
    let leaves = leaves();
    assert!(leaves.len() >= 19, "{} commands", leaves.len());
    for (path, mut command) in leaves {
        let help = command.render_long_help().to_string();
        if !help.contains("Exit codes:\n  0  done") {
            failures.push(format!("{path}: no exit-code table"));
        }
        let examples: Vec<String> = help
            .lines()
            .filter(|l| !l.starts_with("Usage:"))
            .filter_map(|l| l.find("paymos-inbox ").map(|at| l[at..].to_owned()))
            .filter(|l| l.starts_with(&format!("paymos-inbox {path}")))
            .collect();
        if !help.contains("Example") || examples.is_empty() {
            failures.push(format!("{path}: no example of itself"));
        }
        // Each parses as the reader's shell runs it (`every_help_example_parses_…`).
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The repository's root.
fn root() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

// Three install lines, two with a placeholder URL.
#[test]
fn there_is_one_install_line_and_it_names_the_repository() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let repository = manifest
        .lines()
        .find_map(|l| l.strip_prefix("repository = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("the workspace's repository");
    let line = format!("cargo install --locked --git {repository} paymos-inbox");
    let mut found = 0;
    for (name, text) in documents() {
        for install in text
            .match_indices("cargo install ")
            .map(|(at, _)| &text[at..])
        {
            let install = install.lines().next().unwrap_or_default();
            let install = install.split(['`', '#']).next().unwrap_or_default().trim();
            // `cargo install paymos-inbox` named in prose (what it builds) is not an install line.
            if install == "cargo install paymos-inbox" {
                continue;
            }
            assert_eq!(install, line, "{name}: another install line");
            found += 1;
        }
    }
    assert!(
        found >= 2,
        "the install line is in the README and the docs ({found})"
    );
}

// Every name the documents give in backticks that looks like one of the template's
// or the code's (`WorkQueueUrl`, `KmsKeyArn`, `DeliveryLedger`) exists in template.yaml or in
// the code, and every stack and config environment they name exists in samconfig.toml.
#[test]
fn every_name_the_documents_give_exists_in_the_template_or_the_code() {
    fn sources(dir: &std::path::Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let template = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    let samconfig = std::fs::read_to_string(root().join("samconfig.toml")).unwrap();
    let mut code = String::new();
    sources(&root().join("crates"), &mut code);
    // Properties of AWS resources the documents name to say the template does not set them,
    // and what the SAM CLI passes CloudFormation for a parameter it is not given.
    let not_ours = ["PropagateTags", "UsePreviousValue"];
    let mut missing = Vec::new();
    for (name, text) in documents() {
        for (i, span) in text.split('`').enumerate() {
            let camel = span.len() > 3
                && span.chars().all(|c| c.is_ascii_alphanumeric())
                && span.starts_with(|c: char| c.is_ascii_uppercase())
                && span.chars().skip(1).any(|c| c.is_ascii_uppercase())
                && span.chars().any(|c| c.is_ascii_lowercase());
            if i % 2 == 1
                && camel
                && !template.contains(span)
                && !code.contains(span)
                && !not_ours.contains(&span)
            {
                missing.push(format!("{name}: `{span}`"));
            }
        }
        let words: Vec<&str> = text.split_whitespace().collect();
        for pair in words.windows(2) {
            let value = pair[1].trim_matches(|c: char| "`\"'.,;:)".contains(c));
            let placeholder = value.is_empty()
                || value.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                || value.starts_with('<')
                || value.starts_with('$')
                || value == "my-shop";
            for value in value.split('|').filter(|_| !placeholder) {
                match pair[0].trim_start_matches('`') {
                    "--stack-name" if !samconfig.contains(&format!("stack_name = \"{value}\"")) => {
                        missing.push(format!("{name}: stack {value} (not in samconfig.toml)"));
                    }
                    "--config-env"
                        if !samconfig.contains(&format!("[{value}.deploy.parameters]")) =>
                    {
                        missing.push(format!(
                            "{name}: config env {value} (not in samconfig.toml)"
                        ));
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not found:\n{}",
        missing.join("\n")
    );
}

// The hand-off was documented as "retried about a day" while its schedule said
// otherwise; the durations the documents state are the code's.
#[test]
fn the_stated_durations_are_the_codes() {
    let delays = paymos_inbox_core::roads::outbound::RETRY_DELAYS_S;
    let said = |secs: u32| match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s => format!("{} h", s / 3600),
    };
    let spoken: Vec<String> = delays.iter().map(|&d| said(d)).collect();
    let (last, rest) = spoken.split_last().unwrap();
    let schedule = format!("{} and {last}", rest.join(", "));
    let total_hours = delays.iter().sum::<u32>() / 3600;
    let handoff = std::fs::read_to_string(root().join("docs/handoff.md")).unwrap();
    let flat = handoff.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&schedule),
        "docs/handoff.md states the schedule: {schedule}"
    );
    assert!(
        flat.contains(&format!("about {total_hours} hours in all")),
        "docs/handoff.md states the total: about {total_hours} hours"
    );
    for (name, text) in documents() {
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            !flat.contains("retried about a day") && !flat.contains("about 24 minutes"),
            "{name}: an old duration of the hand-off"
        );
    }
}

/// One line of an example block in a command's help: the variables it sets before the command
/// (`PAYMOS_API_KEY=… paymos-inbox …`), the command's words (shell redirections and pipes
/// dropped, `…` standing for a value), and the exit code it states (`# exit N`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelpExample {
    pub line: String,
    pub env: Vec<(String, String)>,
    pub args: Vec<String>,
    pub exit: Option<u8>,
}

/// A shell's variable assignment (`NAME=value`): its name and value.
fn assignment(word: &str) -> Option<(&str, &str)> {
    word.split_once('=').filter(|(name, _)| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    })
}

/// Every command line in the example blocks of `help` (a block: from a line starting
/// `Example` to the next blank line), also one after prose (`then, in another terminal:
/// paymos-inbox send …`); `Err` for a line the shell could not split.
pub fn help_examples(help: &str) -> Vec<Result<HelpExample, String>> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in help.lines() {
        if line.starts_with("Example") {
            in_block = true;
            continue;
        }
        if line.trim().is_empty() {
            in_block = false;
        }
        let Some(at) = line.find("paymos-inbox ").filter(|_| in_block) else {
            continue;
        };
        let (command, comment) = line[at..]
            .split_once(" # ")
            .map_or((&line[at..], ""), |(c, rest)| (c, rest.trim()));
        let exit = comment
            .strip_prefix("exit ")
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|code| code.parse().ok());
        let before: Vec<&str> = line[..at].split_whitespace().collect();
        let env = if before.iter().all(|w| assignment(w).is_some()) {
            before
                .iter()
                .filter_map(|w| assignment(w))
                .map(|(n, v)| (n.to_owned(), v.replace('…', "x")))
                .collect()
        } else {
            Vec::new()
        };
        match shell_words::split(&command.replace('…', "x")) {
            Ok(words) => out.push(Ok(HelpExample {
                line: line.trim().to_owned(),
                env,
                args: words
                    .into_iter()
                    .take_while(|w| !matches!(w.as_str(), ">" | ">>" | "<" | "|" | "2>"))
                    .collect(),
                exit,
            })),
            Err(e) => out.push(Err(format!("cannot split {line:?}: {e}"))),
        }
    }
    out
}

/// Every command's long help (the root, groups and leaves), by its path.
fn helps() -> Vec<(String, String)> {
    fn walk(prefix: &str, command: &mut clap::Command, out: &mut Vec<(String, String)>) {
        out.push((prefix.to_owned(), command.render_long_help().to_string()));
        for sub in command
            .get_subcommands_mut()
            .filter(|s| s.get_name() != "help")
        {
            let path = format!("{prefix} {}", sub.get_name()).trim().to_owned();
            walk(&path, sub, out);
        }
    }
    let mut out = Vec::new();
    let mut root = crate::command_line();
    root.build();
    walk("", &mut root, &mut out);
    out
}

/// The parser with no variable read from this process's environment: what an example sets is
/// given as the option that reads it, and nothing else is.
fn parser_without_environment() -> clap::Command {
    fn strip(command: clap::Command) -> clap::Command {
        command.mut_args(|a| a.env(None)).mut_subcommands(strip)
    }
    strip(crate::command_line())
}

/// The example's words with each variable it sets given as the option of its command that
/// reads it (`PAYMOS_API_KEY=k` → `--api-key k`); `Err` names a variable nothing reads.
fn with_environment(example: &HelpExample) -> Result<Vec<String>, String> {
    let mut command = crate::command_line();
    for word in example.args.iter().skip(1) {
        match command.find_subcommand(word) {
            Some(sub) => command = sub.clone(),
            None => break,
        }
    }
    let mut args = example.args.clone();
    for (name, value) in &example.env {
        let arg = command
            .get_arguments()
            .find(|a| a.get_env() == Some(std::ffi::OsStr::new(name)))
            .ok_or_else(|| format!("sets {name}, which no option of the command reads"))?;
        let long = arg
            .get_long()
            .expect("an option read from a variable has a long name");
        args.extend([format!("--{long}"), value.clone()]);
    }
    Ok(args)
}

// `recheck --help`'s examples did not parse without PAYMOS_API_KEY in the
// reader's environment; every example of every `--help` parses with the CLI's own parser (a
// failure is what exits 2), with the variables it sets and none of the test's.
#[test]
fn every_help_example_parses_with_the_variables_it_sets() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for (path, help) in helps() {
        for example in help_examples(&help) {
            let example = match example {
                Ok(e) => e,
                Err(e) => {
                    failures.push(format!("{path}: {e}"));
                    continue;
                }
            };
            checked += 1;
            let parsed = with_environment(&example).and_then(|args| {
                parser_without_environment()
                    .try_get_matches_from(&args)
                    .and_then(|m| Cli::from_arg_matches(&m))
                    .map_err(|e| e.to_string().lines().next().unwrap_or_default().to_owned())
            });
            if let Err(e) = parsed {
                failures.push(format!(
                    "paymos-inbox {path} --help: {}\n  {e}",
                    example.line
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 25, "the examples were found ({checked})");
}

#[test]
fn an_example_is_read_as_a_shell_would_and_one_that_needs_a_variable_fails_without_it() {
    let help = "Examples:\n  PAYMOS_API_KEY=… PAYMOS_API_SECRET=s paymos-inbox recheck inv_1 --dev-info dev.json\n  paymos-inbox verify --secret whsec_test_… --header 't=1,v1=…' < body.json   # exit 1 unless it verifies\nthen, in another terminal:  paymos-inbox send --wait\n\nUsage: paymos-inbox recheck [OPTIONS]\n";
    let found: Vec<HelpExample> = help_examples(help)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_eq!(
        found[0].env,
        [
            ("PAYMOS_API_KEY".into(), "x".into()),
            ("PAYMOS_API_SECRET".into(), "s".into())
        ]
    );
    assert_eq!(
        found[1].args,
        [
            "paymos-inbox",
            "verify",
            "--secret",
            "whsec_test_x",
            "--header",
            "t=1,v1=x"
        ]
    );
    assert_eq!(found[1].exit, Some(1));
    assert_eq!(found[2].args, ["paymos-inbox", "send", "--wait"]);
    assert!(found[2].env.is_empty());
    let parses = |e: &HelpExample| {
        with_environment(e).is_ok_and(|args| {
            parser_without_environment()
                .try_get_matches_from(&args)
                .is_ok()
        })
    };
    assert!(parses(&found[0]));
    let without = HelpExample {
        env: Vec::new(),
        ..found[0].clone()
    };
    assert!(!parses(&without), "the API key is required");
    let unread = HelpExample {
        env: vec![("NOT_READ".into(), "x".into())],
        ..found[0].clone()
    };
    assert!(with_environment(&unread).is_err());
}
