//! Issue 52, "versions that mean something": the workspace's version is the CHANGELOG's newest
//! release, dated, under `[Unreleased]`; every release after the first opens with its upgrade
//! checklist from the one before; and the release workflow's check (the tag `v<version>` names
//! Cargo.toml's version, and the CHANGELOG has its section) holds, read with the parser the
//! workflow runs (`parse-changelog`, the same version as a library).

use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `1.2.3` as numbers, to order releases.
fn semver(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split('.').map(str::parse::<u64>);
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(Ok(a)), Some(Ok(b)), Some(Ok(c)), None) => Some((a, b, c)),
        _ => None,
    }
}

/// What keeps `changelog` from releasing `version`: each problem in a sentence.
fn release_problems(changelog: &str, version: &str) -> Vec<String> {
    let releases = match parse_changelog::parse(changelog) {
        Ok(r) => r,
        Err(e) => return vec![format!("parse-changelog cannot read it: {e}")],
    };
    let mut problems = Vec::new();
    let names: Vec<&str> = releases.keys().copied().collect();
    if names.first() != Some(&"Unreleased") {
        problems.push(format!(
            "the first section is {:?}, not [Unreleased]",
            names.first()
        ));
    }
    let released: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| *n != "Unreleased")
        .collect();
    if released.first() != Some(&version) {
        problems.push(format!(
            "the newest release is {:?}, not the workspace's {version}",
            released.first()
        ));
    }
    for pair in released.windows(2) {
        let (newer, older) = (pair[0], pair[1]);
        if semver(newer).is_none() || semver(older).is_none() || semver(newer) <= semver(older) {
            problems.push(format!("{newer} is listed above {older}"));
        }
        let notes = releases[newer].notes.trim_start();
        if !notes.starts_with(&format!("### Upgrading from {older}\n")) {
            problems.push(format!(
                "[{newer}] does not open with `### Upgrading from {older}`"
            ));
        }
    }
    if let Some(release) = releases.get(version) {
        let date = release
            .title
            .strip_prefix(&format!("[{version}] - "))
            .and_then(|d| d.parse::<jiff::civil::Date>().ok());
        if date.is_none() {
            problems.push(format!("[{version}] is not dated: {:?}", release.title));
        }
    }
    problems
}

#[test]
fn the_workspace_version_is_the_changelogs_newest_release_with_its_upgrade_checklist() {
    let version = env!("CARGO_PKG_VERSION");
    // The release workflow's reading of the version: `sed -n 's/^version = "\(.*\)"/\1/p'
    // Cargo.toml | head -1`, then `parse-changelog CHANGELOG.md "$version"`.
    let manifest = read("Cargo.toml");
    let first = manifest
        .lines()
        .find_map(|l| l.strip_prefix("version = \"")?.strip_suffix('"'));
    assert_eq!(
        first,
        Some(version),
        "the workflow's sed reads another version"
    );
    let changelog = read("CHANGELOG.md");
    assert!(
        parse_changelog::parse_iter(&changelog).any(|r| r.version == version),
        "`parse-changelog CHANGELOG.md {version}` finds no section: the tag v{version} fails"
    );
    let problems = release_problems(&changelog, version);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Every crate the command line needs asks for this version of its siblings.
    for crate_name in ["core", "aws", "lambda", "cli"] {
        let line = manifest
            .lines()
            .find(|l| l.contains(&format!("path = \"crates/{crate_name}\"")))
            .unwrap_or_else(|| panic!("crates/{crate_name} in [workspace.dependencies]"));
        assert!(
            line.contains(&format!("version = \"{version}\"")),
            "{line}: not version {version}"
        );
    }
}

// What `make release` writes (and release.yml uploads, as `paymos-inbox-<version>.tar.gz`) is
// named by this version: the Makefile reads it from Cargo.toml, as the workflow does.
#[test]
fn the_release_folder_and_tarball_are_named_by_the_version() {
    let version = env!("CARGO_PKG_VERSION");
    let out = std::process::Command::new("make")
        .args(["-n", "--no-print-directory", "release"])
        .current_dir(root())
        .env_remove("MAKEFLAGS")
        .output()
        .expect("make runs");
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "make -n release: {plan}");
    for name in [
        format!("--out dist/paymos-inbox-{version} "),
        format!("-czf dist/paymos-inbox-{version}.tar.gz paymos-inbox-{version}"),
    ] {
        assert!(plan.contains(&name), "make release writes {name}:\n{plan}");
    }
    let workflow = read(".github/workflows/release.yml");
    assert!(
        workflow.contains("assets/$dir.tar.gz")
            && workflow.contains("dir=\"paymos-inbox-$VERSION\"")
    );
}

#[test]
fn the_workflow_reads_the_changelog_with_the_parser_this_test_uses() {
    let workflow = read(".github/workflows/release.yml");
    let pinned: Vec<&str> = workflow
        .match_indices("tool: parse-changelog@")
        .map(|(at, tag)| {
            workflow[at + tag.len()..]
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
        })
        .collect();
    let lock = read("Cargo.lock");
    let locked = lock
        .split("[[package]]")
        .find(|p| p.contains("name = \"parse-changelog\"\n"))
        .and_then(|p| {
            p.lines()
                .find_map(|l| l.strip_prefix("version = \"")?.strip_suffix('"'))
        })
        .expect("parse-changelog in Cargo.lock");
    assert_eq!(pinned.len(), 2, "the version job and the notes: {pinned:?}");
    assert!(
        pinned.iter().all(|p| *p == locked),
        "release.yml runs parse-changelog {pinned:?}, the test reads with {locked}"
    );
}

#[test]
fn a_changelog_that_cannot_release_the_version_is_refused() {
    let good = "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2026-12-06\n\n### Upgrading from 0.1.0\n\n- a step\n\n### Added\n- x\n\n## [0.1.0]\n- first\n";
    assert_eq!(release_problems(good, "0.2.0"), Vec::<String>::new());
    let refused = |text: &str, version: &str, why: &str| {
        let problems = release_problems(text, version);
        assert!(
            problems.iter().any(|p| p.contains(why)),
            "{why:?} not in {problems:?}"
        );
    };
    refused(good, "0.3.0", "not the workspace's 0.3.0");
    refused(
        &good.replace("## [Unreleased]\n\n", ""),
        "0.2.0",
        "not [Unreleased]",
    );
    refused(
        &good.replace("Upgrading from 0.1.0", "Added"),
        "0.2.0",
        "does not open with",
    );
    refused(&good.replace(" - 2026-12-06", ""), "0.2.0", "is not dated");
    refused(
        &good.replace("[0.1.0]", "[0.3.0]"),
        "0.2.0",
        "is listed above",
    );
}
