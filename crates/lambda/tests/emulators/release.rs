//! The release a merchant deploys without compiling (`make release`, `scripts/release.py`),
//! packed here from the binaries as built for this machine: its template is `template.yaml`
//! but for the code locations (and the architecture of a host-built package), `sam validate
//! --lint` passes on it, each zip holds one executable `bootstrap` of the template's
//! architecture, `SHA256SUMS` holds every file, and `sam package` against moto's S3 server
//! uploads every zip exactly as `SHA256SUMS` says.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use paymos_inbox_core::roads::ingest::sha256_hex;

pub(crate) fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).to_path_buf()
}

pub(crate) fn venv(tool: &str) -> PathBuf {
    let path = root().join(".venv/bin").join(tool);
    assert!(
        path.exists(),
        "{} is missing: `make deps` installs it",
        path.display()
    );
    path
}

pub(crate) fn run(command: &mut Command) -> String {
    let out = command.output().expect("runs");
    assert!(
        out.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `(sha256, path)` of each line of a `SHA256SUMS`.
fn sums(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| {
            let (hash, path) = l.split_once("  ").expect("`<sha256>  <path>`");
            (hash.to_owned(), path.to_owned())
        })
        .collect()
}

/// The ELF machine (`x86_64`/`arm64`), mode and entry names of each zip's entries.
fn zip_contents(zip: &Path) -> serde_json::Value {
    let script = r#"
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
out = []
for i in z.infolist():
    head = z.open(i).read(20)
    machine = {0x3E: "x86_64", 0xB7: "arm64"}.get(int.from_bytes(head[18:20], "little"))
    out.append({"name": i.filename, "mode": (i.external_attr >> 16) & 0o777,
                "elf": head[:4] == b"\x7fELF", "machine": machine})
print(json.dumps(out))
"#;
    serde_json::from_str(&run(Command::new("python3").args(["-c", script]).arg(zip))).expect("JSON")
}

/// A server stopped when the test ends, however it ends.
pub(crate) struct Stops(std::process::Child);

impl Drop for Stops {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// moto's server on a free loopback port, stopped when the returned guard drops, and its URL.
pub(crate) fn moto_server() -> (Stops, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let moto = Stops(
        Command::new(venv("moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server"),
    );
    let mut ready = false;
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            ready = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ready, "moto's server did not start");
    (moto, format!("http://127.0.0.1:{port}"))
}

fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "x86_64",
    }
}

#[test]
fn the_release_deploys_the_binaries_it_sums_with_the_template_as_it_is() {
    let scratch_out = paymos_inbox_testkit::scratch("release");
    let out = scratch_out.path().to_owned();
    let binaries = Path::new(env!("CARGO_BIN_EXE_paymos-ingest"))
        .parent()
        .unwrap();
    let arch = host_arch();
    run(Command::new("python3")
        .arg(root().join("scripts/release.py"))
        .arg("--functions")
        .arg(binaries)
        .args(["--arch", arch, "--out"])
        .arg(&out));

    // The template: template.yaml's lines, but for each function's code (its zip) and, for a
    // package of binaries built for another architecture than arm64, the architecture.
    let original = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    let released = std::fs::read_to_string(out.join("template.yaml")).unwrap();
    assert_eq!(original.lines().count(), released.lines().count());
    let mut zips = Vec::new();
    for (was, is) in original.lines().zip(released.lines()) {
        if was == is {
            continue;
        }
        if was == "      CodeUri: ." {
            let zip = is
                .strip_prefix("      CodeUri: functions/")
                .unwrap_or_else(|| panic!("{is}"));
            zips.push(zip.to_owned());
        } else {
            assert_eq!(
                (was.trim(), is.trim()),
                (
                    "Architectures: [arm64]",
                    format!("Architectures: [{arch}]").as_str()
                ),
                "only the code and the architecture differ"
            );
        }
    }
    assert_eq!(zips.len(), 6, "every function: {zips:?}");

    // Each zip: one executable bootstrap of the template's architecture.
    for zip in &zips {
        let contents = zip_contents(&out.join("functions").join(zip));
        assert_eq!(
            contents,
            serde_json::json!([{"name": "bootstrap", "mode": 0o755, "elf": true, "machine": arch}]),
            "{zip}"
        );
    }

    // SHA256SUMS: every file of the release, as it is.
    let sums = sums(&std::fs::read_to_string(out.join("SHA256SUMS")).unwrap());
    let mut listed: Vec<&str> = sums.iter().map(|(_, p)| p.as_str()).collect();
    listed.sort_unstable();
    let mut expected: Vec<String> = zips.iter().map(|z| format!("functions/{z}")).collect();
    expected.extend(["samconfig.toml".into(), "template.yaml".into()]);
    expected.sort();
    assert_eq!(listed, expected);
    for (hash, path) in &sums {
        assert_eq!(
            &sha256_hex(&std::fs::read(out.join(path)).unwrap()),
            hash,
            "{path}"
        );
    }
    // The README's check of an unpacked release, run as it shows it (crates/cli/tests/it/
    // readme.rs: every README command is run or checked), passes here and fails on a changed
    // byte.
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let check = readme
        .lines()
        .map(|l| l.split(" # ").next().unwrap_or_default().trim())
        .find(|l| l.starts_with("sha256sum -c "))
        .expect("the README checks a release's sums");
    run(Command::new("bash").args(["-c", check]).current_dir(&out));
    let samconfig = out.join("samconfig.toml");
    let kept = std::fs::read(&samconfig).unwrap();
    std::fs::write(&samconfig, [kept.as_slice(), b"\n"].concat()).unwrap();
    let changed = Command::new("bash")
        .args(["-c", check])
        .current_dir(&out)
        .output()
        .unwrap();
    assert!(
        !changed.status.success(),
        "`{check}` fails on a changed file"
    );
    std::fs::write(&samconfig, kept).unwrap();

    // SAM's own linter on it.
    run(Command::new(venv("sam"))
        .args(["validate", "--lint", "--template-file"])
        .arg(out.join("template.yaml"))
        .env("AWS_DEFAULT_REGION", "eu-west-1")
        .env("SAM_CLI_TELEMETRY", "0"));

    // `sam package` (what `sam deploy` does first) against moto's S3: every zip uploaded, byte
    // for byte what SHA256SUMS says.
    let (_moto, s3) = moto_server();
    let aws = |command: &mut Command| {
        command
            .env("AWS_ENDPOINT_URL_S3", &s3)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env("SAM_CLI_TELEMETRY", "0")
            .env_remove("AWS_PROFILE");
    };
    let boto = |script: &str| {
        let mut c = Command::new(venv("python"));
        c.args(["-c", script]);
        aws(&mut c);
        run(&mut c)
    };
    boto("import boto3; boto3.client('s3').create_bucket(Bucket='release')");
    let mut package = Command::new(venv("sam"));
    package
        .current_dir(&out)
        .args([
            "package",
            "--template-file",
            "template.yaml",
            "--s3-bucket",
            "release",
        ])
        .args(["--region", "us-east-1", "--output-template-file"])
        .arg(out.join("packaged.yaml"));
    aws(&mut package);
    run(&mut package);
    let uploaded = boto(
        "import boto3, hashlib\n\
         c = boto3.client('s3')\n\
         for o in c.list_objects_v2(Bucket='release')['Contents']:\n    \
         print(o['Key'], hashlib.sha256(c.get_object(Bucket='release', Key=o['Key'])['Body'].read()).hexdigest())",
    );
    let uploaded: Vec<(&str, &str)> = uploaded.lines().filter_map(|l| l.split_once(' ')).collect();
    let packaged = std::fs::read_to_string(out.join("packaged.yaml")).unwrap();
    for (hash, path) in sums.iter().filter(|(_, p)| p.ends_with(".zip")) {
        let (key, _) = uploaded
            .iter()
            .find(|(_, h)| h == hash)
            .unwrap_or_else(|| panic!("{path} was not uploaded as it is: {uploaded:?}"));
        assert!(
            packaged.contains(&format!("CodeUri: s3://release/{key}")),
            "{path}: the packaged template points at it"
        );
    }
    assert_eq!(uploaded.len(), zips.len(), "the zips and nothing else");
    std::fs::remove_dir_all(&out).ok();
}
