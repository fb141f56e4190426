//! Issue 34, point 2: the OpenFlow channel against hostile local users and
//! peers. `punix:` is root's only (mode 0600: `ovs-ofctl unix:PATH` works
//! as root, and is refused for `nobody`); `pssl:` and `ssl:` are mutual TLS
//! with a CA and certificates made here with `openssl` (ovs-ofctl with a
//! certificate of the CA adds and dumps flows, one of another CA is
//! refused; the switch connects to a TLS controller of its CA and refuses
//! one of another); 200 connections that never send HELLO do not keep a
//! real client out; a controller that stops (SIGSTOP) is noticed by the
//! inactivity probe within two intervals, and the switch connects again
//! once it continues.
//!
//! The switch runs on in-memory ports; the controllers are a small Python
//! script (a separate process, so it can be stopped). Every process is
//! killed on drop; the tests fail (never skip) without ovs-ofctl, openssl,
//! setpriv or python3.

mod support;
use support::*;

use linerate_pipeline::switch::openflow::client::Client;
use linerate_pipeline::switch::Rule;
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A running switch and its stderr, line by line (with the time each line
/// was read).
struct Sw {
    p: Proc,
    err: Receiver<(Instant, String)>,
}

/// `linerate switch` on in-memory ports (1 a source, 2 and 3 sinks) with
/// `args` (the OpenFlow options); final account as JSON on stdout.
fn spawn(args: &[&str]) -> Sw {
    let mut c = Command::new(EXE);
    c.args([
        "switch",
        "--port",
        "1=mem:a?source=64&flows=8",
        "--port",
        "2=mem:b?sink",
        "--port",
        "3=mem:c?sink",
        "--poll",
        "wait",
        "--json",
        "--quiet",
    ])
    .args(args)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut p = Proc::from(c.spawn().expect("start linerate switch"));
    let stderr = p.child_mut().unwrap().stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send((Instant::now(), l)).is_err() {
                break;
            }
        }
    });
    Sw { p, err: rx }
}

impl Sw {
    /// The first stderr line (from now on) that contains `what`, and when it
    /// came.
    fn line(&mut self, what: &str, limit: Duration) -> (Instant, String) {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.err.recv_timeout(left) {
                Ok((t, l)) if l.contains(what) => return (t, l),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no switch log line with '{what}' within {limit:?}")
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.p.assert_running("linerate switch");
                    panic!("the switch closed its stderr")
                }
            }
        }
    }

    /// Stop it (SIGINT); its final account's `openflow` object.
    fn finish(self) -> serde_json::Value {
        let j = self
            .p
            .finish_json(Duration::from_secs(10), "linerate switch");
        j["openflow"].clone()
    }
}

/// Wait until `port` on 127.0.0.1 accepts connections.
fn wait_listening(sw: &mut Sw, port: u16) {
    wait_until(Duration::from_secs(20), "the OpenFlow listener", || {
        sw.p.assert_running("linerate switch --openflow");
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

fn ofctl(args: &[&str]) -> Output {
    Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "--timeout=10"])
        .args(args)
        .output()
        .expect("run ovs-ofctl")
}

fn ofctl_ok(args: &[&str]) -> String {
    let out = ofctl(args);
    assert_ok(&out, &format!("ovs-ofctl {args:?}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run `openssl ARGS` in `dir`; it must succeed.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert_ok(&out, &format!("openssl {args:?}"));
}

/// A CA (`NAME-ca.pem`, its key `NAME-ca-key.pem`) in `dir`.
fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=linerate test {name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            &format!("{name}-ca-key.pem"),
            "-out",
            &format!("{name}-ca.pem"),
        ],
    );
}

/// A certificate `NAME-cert.pem` (key `NAME-key.pem`) signed by CA `ca`,
/// for clients and servers alike, without a name or address that the
/// other side could check (Open vSwitch checks none).
fn make_cert(dir: &Path, ca: &str, name: &str, serial: u32) -> (PathBuf, PathBuf) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            &format!("/CN=linerate test {name}"),
            "-keyout",
            &format!("{name}-key.pem"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    std::fs::write(
        dir.join("leaf.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}-ca.pem"),
            "-CAkey",
            &format!("{ca}-ca-key.pem"),
            "-set_serial",
            &serial.to_string(),
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
            "-out",
            &format!("{name}-cert.pem"),
        ],
    );
    (
        dir.join(format!("{name}-key.pem")),
        dir.join(format!("{name}-cert.pem")),
    )
}

/// The test's PKI: CA `good` with certificates `switch`, `client` and
/// `controller`; CA `other` with `stranger`.
fn pki() -> TempDir {
    require_tool("openssl");
    let d = TempDir::new("lr-oftls");
    make_ca(d.path(), "good");
    make_ca(d.path(), "other");
    make_cert(d.path(), "good", "switch", 1);
    make_cert(d.path(), "good", "client", 2);
    make_cert(d.path(), "good", "controller", 3);
    make_cert(d.path(), "other", "stranger", 4);
    d
}

/// ovs-ofctl's TLS options for certificate `name` (trusting CA `good`).
fn tls_opts(d: &TempDir, name: &str) -> [String; 3] {
    [
        format!(
            "--private-key={}",
            d.join(&format!("{name}-key.pem")).display()
        ),
        format!(
            "--certificate={}",
            d.join(&format!("{name}-cert.pem")).display()
        ),
        format!("--ca-cert={}", d.join("good-ca.pem").display()),
    ]
}

/// The switch's TLS options (its certificate of CA `good`).
fn switch_tls(d: &TempDir) -> Vec<String> {
    vec![
        "--private-key".into(),
        d.join("switch-key.pem").display().to_string(),
        "--certificate".into(),
        d.join("switch-cert.pem").display().to_string(),
        "--ca-cert".into(),
        d.join("good-ca.pem").display().to_string(),
    ]
}

#[test]
fn punix_serves_root_and_refuses_other_users() {
    require_root();
    require_tools(&["ovs-ofctl", "setpriv"]);
    let dir = TempDir::new("lr-ofunix");
    // The directory is traversable by anyone (not listable): a refusal can
    // only come from the socket's own mode.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let sock = dir.join("sw.of");
    let target = format!("unix:{}", sock.display());
    let mut sw = spawn(&["--openflow", &format!("punix:{}", sock.display())]);
    wait_until(Duration::from_secs(20), "the punix: socket", || {
        sw.p.assert_running("linerate switch --openflow punix:");
        UnixStream::connect(&sock).is_ok()
    });
    let md = std::fs::symlink_metadata(&sock).unwrap();
    assert!(md.file_type().is_socket());
    assert_eq!(md.mode() & 0o777, 0o600, "the socket is root's only");
    assert_eq!(md.uid(), 0);

    // Root: ovs-ofctl adds and dumps over unix:PATH.
    ofctl_ok(&["add-flow", &target, "priority=5,in_port=1,actions=output:2"]);
    let dump = ofctl_ok(&["dump-flows", &target]);
    assert!(
        dump.contains("priority=5,in_port=1 actions=output:2"),
        "{dump}"
    );

    // nobody: the path is reachable (stat works), the socket refuses.
    let nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
            .args(args)
            .output()
            .expect("run setpriv")
    };
    let st = nobody(&["stat", "-c", "%a %U", sock.to_str().unwrap()]);
    assert_ok(&st, "stat as nobody");
    assert_eq!(String::from_utf8_lossy(&st.stdout).trim(), "600 root");
    let out = nobody(&[
        "ovs-ofctl",
        "-O",
        "OpenFlow13",
        "--timeout=10",
        "dump-flows",
        &target,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "nobody was served: {err}");
    assert!(err.contains("Permission denied"), "{err}");
    // The switch still serves root, and removes its socket at the end.
    assert!(ofctl_ok(&["dump-flows", &target]).contains("in_port=1"));
    let of = sw.finish();
    assert!(of["connections"].as_u64().unwrap() >= 3, "{of}");
    assert!(!sock.exists(), "the socket file is removed at the end");
}

#[test]
fn pssl_serves_certificates_of_its_ca_only() {
    require_tool("ovs-ofctl");
    let d = pki();
    let port = free_port();
    let mut args = vec!["--openflow".to_string(), format!("pssl:{port}")];
    args.extend(switch_tls(&d));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut sw = spawn(&args);
    wait_listening(&mut sw, port);
    let target = format!("ssl:127.0.0.1:{port}");

    // A client certificate of the switch's CA: flows added and dumped.
    let ok = tls_opts(&d, "client");
    let with = |cmd: &[&str], o: &[String; 3]| {
        let mut a: Vec<&str> = o.iter().map(String::as_str).collect();
        a.push(cmd[0]);
        a.push(&target);
        a.extend(&cmd[1..]);
        ofctl(&a)
    };
    let out = with(
        &["add-flow", "priority=7,ip,nw_dst=10.0.0.9,actions=output:3"],
        &ok,
    );
    assert_ok(&out, "ovs-ofctl add-flow over ssl:");
    let out = with(&["dump-flows"], &ok);
    assert_ok(&out, "ovs-ofctl dump-flows over ssl:");
    let dump = String::from_utf8_lossy(&out.stdout);
    assert!(
        dump.contains("priority=7,ip,nw_dst=10.0.0.9 actions=output:3"),
        "{dump}"
    );

    // A client certificate of another CA (the client trusts the switch):
    // refused in the handshake, and the switch says so.
    let out = with(&["dump-flows"], &tls_opts(&d, "stranger"));
    assert!(
        !out.status.success(),
        "another CA's client was served: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let (_, l) = sw.line("refused: TLS handshake", Duration::from_secs(10));
    assert!(l.contains("certificate"), "{l}");
    // Plain TCP to the TLS port: no OpenFlow at all.
    let out = ofctl(&["dump-flows", &format!("tcp:127.0.0.1:{port}")]);
    assert!(!out.status.success());

    // Still served; the rule is still the only one.
    let out = with(&["dump-flows"], &ok);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    let of = sw.finish();
    assert!(of["tls_failures"].as_u64().unwrap() >= 2, "{of}");
}

/// A controller: listens on 127.0.0.1 (a port of its choosing, printed as
/// `listening PORT`), with TLS if given `CERT KEY CA` (client certificates
/// required); for each connection sends HELLO, asks for the features after
/// the switch's HELLO, answers ECHO_REQUESTs, and prints `up N` when the
/// features reply came, `closed N` at the end.
const CONTROLLER: &str = r#"
import socket, ssl, struct, sys, threading
ctx = None
if len(sys.argv) == 4:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    ctx.load_verify_locations(sys.argv[3])
    ctx.verify_mode = ssl.CERT_REQUIRED
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(64)
print("listening", ls.getsockname()[1], flush=True)

def exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b

def serve(s, i):
    try:
        s.settimeout(120)
        if ctx:
            s = ctx.wrap_socket(s, server_side=True)
        s.sendall(struct.pack("!BBHI", 4, 0, 8, 0))
        while True:
            v, t, n, x = struct.unpack("!BBHI", exact(s, 8))
            body = exact(s, max(n - 8, 0))
            if t == 0:
                s.sendall(struct.pack("!BBHI", 4, 5, 8, 1))
            elif t == 2:
                s.sendall(struct.pack("!BBHI", 4, 3, n, x) + body)
            elif t == 6:
                print("up", i, flush=True)
    except Exception as e:
        print("closed", i, type(e).__name__, e, flush=True)

i = 0
while True:
    c, _ = ls.accept()
    i += 1
    threading.Thread(target=serve, args=(c, i), daemon=True).start()
"#;

struct Controller {
    p: Proc,
    out: Receiver<String>,
    port: u16,
}

impl Controller {
    fn start(dir: &TempDir, tls: &[PathBuf]) -> Controller {
        let py = require_python(&["ssl"]);
        let script = dir.write("controller.py", CONTROLLER);
        let mut p = Proc::from(
            Command::new(py)
                .arg(&script)
                .args(tls)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start the controller"),
        );
        let out = p.stdout_lines();
        let first = out
            .recv_timeout(Duration::from_secs(20))
            .expect("the controller's port");
        let port = first
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("controller said: {first}"));
        Controller { p, out, port }
    }

    /// Wait for a connection whose HELLO and features exchange completed.
    fn up(&self, limit: Duration) -> String {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(l) if l.starts_with("up ") => return l,
                Ok(_) => {}
                Err(_) => panic!("no connection from the switch came up within {limit:?}"),
            }
        }
    }
}

/// A TLS controller with certificate `name` (trusting CA `good`), and a
/// switch connecting to it over `ssl:`.
fn ssl_controller(d: &TempDir, name: &str) -> (Controller, Sw) {
    let ctl = Controller::start(
        d,
        &[
            d.join(&format!("{name}-cert.pem")),
            d.join(&format!("{name}-key.pem")),
            d.join("good-ca.pem"),
        ],
    );
    let mut args = vec![
        "--openflow".to_string(),
        format!("ssl:127.0.0.1:{}", ctl.port),
    ];
    args.extend(switch_tls(d));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let sw = spawn(&args);
    (ctl, sw)
}

#[test]
fn ssl_connects_to_a_controller_of_its_ca_only() {
    let d = pki();
    let (good, mut sw) = ssl_controller(&d, "controller");
    // The controller's certificate names no address: the chain is what
    // counts, as in Open vSwitch.
    assert_eq!(good.up(Duration::from_secs(20)), "up 1");
    sw.p.assert_running("linerate switch --openflow ssl:");
    drop(sw);

    // A controller whose certificate is of another CA: refused.
    let (bad, mut sw) = ssl_controller(&d, "stranger");
    let (_, l) = sw.line("refused: TLS handshake", Duration::from_secs(20));
    assert!(l.contains("UnknownIssuer"), "{l}");
    let of = sw.finish();
    assert!(of["tls_failures"].as_u64().unwrap() >= 1, "{of}");
    assert!(
        !std::iter::from_fn(|| bad.out.try_recv().ok()).any(|l| l.starts_with("up ")),
        "the switch completed a session with a controller of another CA"
    );
}

#[test]
fn tls_files_that_do_not_fit_are_one_line_errors() {
    let d = pki();
    let f = |n: &str| d.join(n).display().to_string();
    let run = |args: &[&str]| {
        let mut a = vec![
            "switch",
            "--port",
            "1=mem:a?source=64",
            "--port",
            "2=mem:b?sink",
            "--json",
            "--duration",
            "5",
        ];
        a.extend(args);
        let out = linerate(&a);
        assert!(!out.status.success(), "{args:?} was taken");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(err.lines().count(), 1, "{err}");
        err
    };
    let (k, c, ca) = (f("switch-key.pem"), f("switch-cert.pem"), f("good-ca.pem"));
    // --openflow EP with these key, certificate and CA (if any) files.
    let tls = |ep: &str, key: &str, cert: &str, ca: Option<&str>| {
        let mut a = vec![
            "--openflow",
            ep,
            "--private-key",
            key,
            "--certificate",
            cert,
        ];
        a.extend(ca.map(|ca| ["--ca-cert", ca]).iter().flatten());
        run(&a)
    };
    let e = tls("pssl:0", &k, &c, None);
    assert!(e.contains("missing: --ca-cert"), "{e}");
    let missing = f("nothing.pem");
    let e = tls("pssl:0", &k, &c, Some(&missing));
    assert!(
        e.contains(&format!("--ca-cert '{missing}': cannot read")),
        "{e}"
    );
    // The key of another certificate.
    let e = tls("ssl:127.0.0.1", &f("client-key.pem"), &c, Some(&ca));
    assert!(e.contains("--private-key") && e.contains(&c), "{e}");
    // A certificate where the key should be.
    let e = tls("pssl:0", &c, &c, Some(&ca));
    assert!(e.contains(&format!("--private-key '{c}'")), "{e}");
    // TLS files for a channel that is not TLS.
    let e = run(&["--openflow", "ptcp:0", "--ca-cert", &ca]);
    assert!(e.contains("for ssl: and pssl:"), "{e}");
    let e = run(&["--openflow", "tcp:::1:x"]);
    assert!(e.contains("not an IP address"), "{e}");
}

#[test]
fn silent_connections_never_lock_out_a_controller() {
    require_tool("ovs-ofctl");
    let port = free_port();
    let mut sw = spawn(&["--openflow", &format!("ptcp:{port}")]);
    let (_, warn) = sw.line("has no authentication", Duration::from_secs(20));
    assert!(warn.contains(&format!("ptcp:{port}:127.0.0.1")), "{warn}");
    wait_listening(&mut sw, port);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    // 200 connections that never send anything (more than the 64 slots).
    let silent: Vec<TcpStream> = (0..200)
        .map(|i| {
            TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("silent connection {i}: {e}"))
        })
        .collect();
    // A real client is served at once, however many are silent.
    let t = Instant::now();
    let mut c = Client::connect(addr, Duration::from_secs(10)).expect("served");
    c.add(&Rule::parse("priority=3,udp,actions=output:2").unwrap())
        .unwrap();
    assert!(c.barrier().unwrap().is_empty());
    assert_eq!(c.dump_flows().unwrap().len(), 1);
    let served = t.elapsed();
    eprintln!("served after {served:?}, with 200 silent connections open");
    assert!(served < Duration::from_secs(10), "served after {served:?}");
    let dump = ofctl_ok(&["dump-flows", &format!("tcp:127.0.0.1:{port}")]);
    assert!(dump.contains("priority=3,udp actions=output:2"), "{dump}");
    drop(c);
    // Each silent one got our HELLO, then was closed (evicted at once, or
    // after 5 s without a HELLO).
    for (i, mut s) in silent.into_iter().enumerate() {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got)
            .unwrap_or_else(|e| panic!("silent connection {i} not closed: {e}"));
        assert!(
            got.len() == 16 && got[1] == 0,
            "connection {i}: HELLO, then the end: {got:?}"
        );
    }
    let of = sw.finish();
    let closed = of["evicted"].as_u64().unwrap() + of["hello_timeouts"].as_u64().unwrap();
    assert!(closed >= 200, "{of}");
    assert!(of["evicted"].as_u64().unwrap() > 0, "{of}");
}

#[test]
fn a_stopped_controller_is_noticed_and_the_switch_comes_back() {
    let d = TempDir::new("lr-ofprobe");
    let ctl = Controller::start(&d, &[]);
    // Probe after 2 s of silence, disconnect after 4 s.
    const N: f64 = 2.0;
    let mut sw = spawn(&[
        "--openflow",
        &format!("tcp:127.0.0.1:{}", ctl.port),
        "--inactivity-probe",
        "2",
    ]);
    assert_eq!(ctl.up(Duration::from_secs(20)), "up 1");
    // Probes answered: the session outlives several intervals.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs_f64(2.5 * N) {
        sw.p.assert_running("linerate switch");
        assert!(ctl.out.try_recv().is_err(), "the session ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    ctl.p.signal(libc::SIGSTOP);
    let stopped = Instant::now();
    let (at, l) = sw.line("inactivity probe", Duration::from_secs(30));
    let took = at.duration_since(stopped).as_secs_f64();
    eprintln!("the stopped controller was noticed after {took:.2} s: {l}");
    // Heard from at most N before the stop (a probe is answered at once),
    // so the end comes at most 2N after it; 1 s more for the loop's 100 ms
    // wake-ups and a loaded machine's scheduling. Not before N: the
    // controller answered everything until it stopped.
    assert!(
        took <= 2.0 * N + 1.0,
        "noticed {took:.2} s after the stop: {l}"
    );
    assert!(
        took >= N - 0.5,
        "disconnected {took:.2} s after the stop: {l}"
    );
    ctl.p.signal(libc::SIGCONT);
    // The switch connects again (its attempts while the controller was
    // stopped wait in the listen queue, and end without a HELLO): one comes
    // up within the backoff (at most 8 s) and a HELLO deadline.
    let again = ctl.up(Duration::from_secs(30));
    assert_ne!(again, "up 1");
    sw.p.assert_running("linerate switch");
    let of = sw.finish();
    assert!(of["probe_timeouts"].as_u64().unwrap() >= 1, "{of}");
}
