//! Scenarios in Lua (the MoonGen precedent): ramps, phases, rate sweeps,
//! reading live counters, stopping on a condition. A script runs on the
//! control thread and talks to the generator through [`GenControl`]
//! (atomics read by the generator once per batch): it is never on the
//! per-packet path.
//!
//! Globals a script sees:
//! - `streams()` -> list of stream names
//! - `set_rate(name, pps)`, `pause(name)`, `resume(name)`
//! - `stats()` -> `{ name = { packets = n, bytes = n, pps = x }, ... }` (generator side)
//! - `rx()` -> `{ name = { packets, lost, reordered, duplicates, p50_ns, p99_ns } }` when a receiver runs in the same process, else nil
//! - `sleep(seconds)` (returns early, with false, when the run is stopped), `elapsed()` seconds since start
//! - `log(...)`, `stop()`, `running()`
//!
//! Lua 5.4, built from source (mlua `vendored`): no system library needed.
//!
//! The script runs as root in a sandbox: Lua's `base`, `table`, `string`,
//! `math`, `utf8` and `coroutine` libraries only, without `dofile` and
//! `loadfile`; no `io`, `os`, `package`/`require` or `debug` unless the
//! user asks for them with `--script-unsafe` (then everything but `debug`).
//! Code is text only: Lua 5.4 does not verify bytecode, and a crafted
//! binary chunk reads and writes any memory (code execution as root from a
//! scenario file). So the script itself is loaded as text, `load` only
//! takes text chunks, and `string.dump` (the one way to make bytecode from
//! a function) is gone: nothing in the sandbox reaches bytecode.
//! Every argument is checked (`sleep(math.huge)` is an error, not a panic),
//! and a hook every 10 000 instructions ends a script that runs on after the
//! run was stopped (SIGINT/SIGTERM, `stop()`, the generator done): `while
//! true do end` cannot keep the process alive.

use anyhow::{anyhow, Result};
pub use linerate_pipeline::generate::run::GenControl;
use mlua::chunk::ChunkMode;
use mlua::{HookTriggers, Lua, LuaOptions, StdLib, Value, VmState};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn lua_err(e: String) -> mlua::Error {
    mlua::Error::RuntimeError(e)
}

/// How a script ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// It ran to its end.
    Done,
    /// The run was stopped while it was still running Lua code; it was ended
    /// by the instruction hook.
    Interrupted,
}

/// What the script may reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sandbox {
    /// The default: no `io`, `os`, `require`, `dofile`, `loadfile`.
    On,
    /// `--script-unsafe`: Lua's standard libraries except `debug`.
    Off,
}

/// Marker of the hook's error, to tell an interruption from a failure.
const INTERRUPTED: &str = "linerate: the run was stopped";
/// Memory a script may hold.
const MEMORY_LIMIT: usize = 512 << 20;

/// Wraps the protected calls so that they pass the hook's interruption on
/// (called with a function telling whether it fired and the message).
const PROTECTED_CALLS: &str = r#"
return function(fired, msg)
  local function pass(ok, ...)
    if not ok and fired() then error(msg, 0) end
    return ok, ...
  end
  local pcall0, xpcall0 = pcall, xpcall
  pcall = function(...) return pass(pcall0(...)) end
  xpcall = function(...) return pass(xpcall0(...)) end
  if coroutine then
    local resume0 = coroutine.resume
    coroutine.resume = function(...) return pass(resume0(...)) end
  end
end
"#;

/// The sandbox's `load`: Lua's own, with the mode forced to text ("t"),
/// so a string of bytecode is refused ("attempt to load a binary chunk").
/// The argument count is kept: `load(s, name, mode, nil)` (an explicit nil
/// environment) differs from `load(s)` in Lua.
const TEXT_ONLY_LOAD: &str = r#"
local load0, select = load, select
load = function(...)
  local chunk, name, _, env = ...
  if select('#', ...) >= 4 then return load0(chunk, name, "t", env) end
  return load0(chunk, name, "t")
end
string.dump = nil
"#;

/// How long a script may go on running Lua code after the run was stopped.
pub const GRACE: Duration = Duration::from_millis(500);

/// Run `path` to completion (or until `stop`). Errors are one line:
/// `script FILE: MESSAGE` with Lua's `[string]:LINE:` location kept.
pub fn run(
    path: &Path,
    ctl: Arc<dyn GenControl>,
    stop: Arc<AtomicBool>,
    quiet: bool,
    sandbox: Sandbox,
) -> Result<Ended> {
    let src =
        std::fs::read_to_string(path).map_err(|e| anyhow!("script {}: {e}", path.display()))?;
    let name = path.display().to_string();
    run_source(&src, &name, ctl, stop, quiet, sandbox)
}

/// A scenario running beside the generator, in its own thread.
pub struct Scenario {
    path: std::path::PathBuf,
    thread: std::thread::JoinHandle<Result<()>>,
}

/// Start `path` in a thread of its own; it stops the run when it ends (the
/// scenario decides when the run ends).
pub fn spawn(
    path: &Path,
    ctl: Arc<dyn GenControl>,
    stop: Arc<AtomicBool>,
    quiet: bool,
    sandbox: Sandbox,
) -> Scenario {
    let p = path.to_path_buf();
    let thread = std::thread::spawn(move || -> Result<()> {
        let r = run(&p, ctl.clone(), stop, quiet, sandbox);
        ctl.stop();
        if let Ok(Ended::Interrupted) = r {
            eprintln!(
                "script {}: ended: the run was stopped while it was still running",
                p.display()
            );
        }
        r.map(|_| ())
    });
    Scenario {
        path: path.to_path_buf(),
        thread,
    }
}

impl Scenario {
    /// After the run: the script's result. It ends about [`GRACE`] after the
    /// run (its instruction hook); one stuck in a single long library call
    /// (a huge string.rep) cannot be interrupted and is left behind with an
    /// error: the process exits.
    pub fn finish(self) -> Result<()> {
        let until = Instant::now() + GRACE + Duration::from_secs(1);
        while !self.thread.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        if !self.thread.is_finished() {
            return Err(anyhow!(
                "script {}: still running {:.1} s after the run ended (inside one long library call); abandoned",
                self.path.display(),
                (GRACE + Duration::from_secs(1)).as_secs_f64()
            ));
        }
        self.thread
            .join()
            .map_err(|_| anyhow!("script thread panicked"))?
    }
}

/// As [`run`], from a string (tests, `-e`).
pub fn run_source(
    src: &str,
    name: &str,
    ctl: Arc<dyn GenControl>,
    stop: Arc<AtomicBool>,
    quiet: bool,
    sandbox: Sandbox,
) -> Result<Ended> {
    let lua = match sandbox {
        Sandbox::On => Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8 | StdLib::COROUTINE,
            LuaOptions::default(),
        ),
        Sandbox::Off => Lua::new_with(StdLib::ALL_SAFE, LuaOptions::default()),
    }
    .map_err(|e| anyhow!("script {name}: {e}"))?;
    let one_line = |e: mlua::Error| {
        anyhow!(
            "script {name}: {}",
            e.to_string().lines().next().unwrap_or("error").trim()
        )
    };
    let g = lua.globals();
    let t0 = Instant::now();
    if sandbox == Sandbox::On {
        // Base-library functions that read files.
        for f in ["dofile", "loadfile"] {
            g.set(f, Value::Nil).map_err(one_line)?;
        }
        lua.load(TEXT_ONLY_LOAD)
            .set_name("linerate")
            .set_mode(ChunkMode::Text)
            .exec()
            .map_err(one_line)?;
    }
    {
        // Ends the script once the run has been over for GRACE (time for a
        // script to log its last lines after `stop()`); checked every
        // 10 000 VM instructions (a few microseconds), so a busy loop ends
        // about GRACE after SIGTERM.
        // A global hook: it also runs in coroutines the script makes (a
        // per-thread hook would not). Once it has fired, protected calls
        // (pcall, xpcall, coroutine.resume) pass the interruption on
        // instead of catching it, so no loop around them outlives it.
        let (st, c) = (stop.clone(), ctl.clone());
        let over_since = std::sync::atomic::AtomicU64::new(u64::MAX);
        let fired = Arc::new(AtomicBool::new(false));
        let f = fired.clone();
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(10_000),
            move |_, _| {
                if !(st.load(Ordering::Relaxed) || c.finished()) {
                    return Ok(VmState::Continue);
                }
                let now = t0.elapsed().as_nanos() as u64;
                let since = over_since.load(Ordering::Relaxed);
                if since == u64::MAX {
                    over_since.store(now, Ordering::Relaxed);
                } else if now - since >= GRACE.as_nanos() as u64 {
                    f.store(true, Ordering::Relaxed);
                    return Err(mlua::Error::RuntimeError(INTERRUPTED.into()));
                }
                Ok(VmState::Continue)
            },
        )
        .map_err(one_line)?;
        let fired_fn = lua
            .create_function(move |_, ()| Ok(fired.load(Ordering::Relaxed)))
            .map_err(one_line)?;
        let wrap: mlua::Function = lua
            .load(PROTECTED_CALLS)
            .set_name("linerate")
            .eval()
            .map_err(one_line)?;
        wrap.call::<()>((fired_fn, INTERRUPTED)).map_err(one_line)?;
        // Memory: a script that builds without end gets a Lua error, not
        // the machine's memory.
        lua.set_memory_limit(MEMORY_LIMIT).map_err(one_line)?;
    }
    {
        let c = ctl.clone();
        g.set(
            "streams",
            lua.create_function(move |_, ()| Ok(c.streams()))
                .map_err(one_line)?,
        )
        .map_err(one_line)?;
        let c = ctl.clone();
        g.set(
            "set_rate",
            lua.create_function(move |_, (s, pps): (String, f64)| {
                if !(pps.is_finite() && pps >= 0.0) {
                    return Err(lua_err(format!(
                        "set_rate('{s}', {pps}): the rate must be a number >= 0"
                    )));
                }
                c.set_rate_pps(&s, pps).map_err(lua_err)
            })
            .map_err(one_line)?,
        )
        .map_err(one_line)?;
        let c = ctl.clone();
        g.set(
            "pause",
            lua.create_function(move |_, s: String| c.set_paused(&s, true).map_err(lua_err))
                .map_err(one_line)?,
        )
        .map_err(one_line)?;
        let c = ctl.clone();
        g.set(
            "resume",
            lua.create_function(move |_, s: String| c.set_paused(&s, false).map_err(lua_err))
                .map_err(one_line)?,
        )
        .map_err(one_line)?;
        let c = ctl.clone();
        g.set(
            "stats",
            lua.create_function(move |lua, ()| {
                let t = lua.create_table()?;
                for s in c.stats() {
                    let e = lua.create_table()?;
                    e.set("packets", s.packets)?;
                    e.set("bytes", s.bytes)?;
                    e.set("pps", s.pps)?;
                    t.set(s.name, e)?;
                }
                Ok(t)
            })
            .map_err(one_line)?,
        )
        .map_err(one_line)?;
        let c = ctl.clone();
        g.set(
            "rx",
            lua.create_function(move |lua, ()| {
                let Some(v) = c.rx() else {
                    return Ok(Value::Nil);
                };
                let t = lua.create_table()?;
                for s in v {
                    let e = lua.create_table()?;
                    e.set("packets", s.packets)?;
                    e.set("lost", s.lost)?;
                    e.set("reordered", s.reordered)?;
                    e.set("duplicates", s.duplicates)?;
                    e.set("p50_ns", s.p50_ns)?;
                    e.set("p99_ns", s.p99_ns)?;
                    t.set(s.name, e)?;
                }
                Ok(Value::Table(t))
            })
            .map_err(one_line)?,
        )
        .map_err(one_line)?;
        let st = stop.clone();
        let c = ctl.clone();
        g.set(
            "sleep",
            lua.create_function(move |_, secs: f64| {
                // At most a day per call (Duration panics on huge values).
                if !(secs.is_finite() && (0.0..=86_400.0).contains(&secs)) {
                    return Err(lua_err(format!(
                        "sleep({secs}): seconds must be a number from 0 to 86400"
                    )));
                }
                let end = Instant::now() + Duration::from_secs_f64(secs);
                while Instant::now() < end {
                    if st.load(Ordering::SeqCst) || c.finished() {
                        return Ok(false);
                    }
                    std::thread::sleep(
                        Duration::from_millis(5).min(end.saturating_duration_since(Instant::now())),
                    );
                }
                Ok(true)
            })
            .map_err(one_line)?,
        )
        .map_err(one_line)?;
        g.set(
            "elapsed",
            lua.create_function(move |_, ()| Ok(t0.elapsed().as_secs_f64()))
                .map_err(one_line)?,
        )
        .map_err(one_line)?;
        g.set(
            "log",
            lua.create_function(move |_, args: mlua::Variadic<Value>| {
                let parts: Vec<String> = args
                    .iter()
                    .map(|v| v.to_string().unwrap_or_else(|_| format!("{v:?}")))
                    .collect();
                if !quiet {
                    eprintln!(
                        "[script {:>7.2}s] {}",
                        t0.elapsed().as_secs_f64(),
                        parts.join(" ")
                    );
                }
                Ok(())
            })
            .map_err(one_line)?,
        )
        .map_err(one_line)?;
        let c = ctl.clone();
        g.set(
            "stop",
            lua.create_function(move |_, ()| {
                c.stop();
                Ok(())
            })
            .map_err(one_line)?,
        )
        .map_err(one_line)?;
        let st = stop.clone();
        let c = ctl.clone();
        g.set(
            "running",
            lua.create_function(move |_, ()| Ok(!st.load(Ordering::SeqCst) && !c.finished()))
                .map_err(one_line)?,
        )
        .map_err(one_line)?;
    }
    let chunk = lua.load(src).set_name(name);
    // The sandbox runs text only (see the module doc); --script-unsafe
    // lets a precompiled script run as before.
    let chunk = match sandbox {
        Sandbox::On => chunk.set_mode(ChunkMode::Text),
        Sandbox::Off => chunk,
    };
    match chunk.exec() {
        Ok(()) => Ok(Ended::Done),
        Err(e) if e.to_string().contains(INTERRUPTED) => Ok(Ended::Interrupted),
        Err(e) => Err(one_line(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Fake {
        rates: Mutex<Vec<(String, f64)>>,
        paused: Mutex<Vec<(String, bool)>>,
        stopped: AtomicBool,
    }
    use linerate_pipeline::generate::run::{RxCounters, StreamCounters};

    impl GenControl for Fake {
        fn streams(&self) -> Vec<String> {
            vec!["a".into(), "b".into()]
        }
        fn set_rate_pps(&self, s: &str, pps: f64) -> Result<(), String> {
            if s != "a" && s != "b" {
                return Err(format!("no stream named '{s}'"));
            }
            self.rates.lock().unwrap().push((s.into(), pps));
            Ok(())
        }
        fn set_paused(&self, s: &str, p: bool) -> Result<(), String> {
            self.paused.lock().unwrap().push((s.into(), p));
            Ok(())
        }
        fn stats(&self) -> Vec<StreamCounters> {
            let n = self.rates.lock().unwrap().len() as u64;
            vec![StreamCounters {
                name: "a".into(),
                packets: 100 * n,
                bytes: 6400 * n,
                pps: 1.0,
            }]
        }
        fn rx(&self) -> Option<Vec<RxCounters>> {
            None
        }
        fn stop(&self) {
            self.stopped.store(true, Ordering::SeqCst);
        }
        fn finished(&self) -> bool {
            self.stopped.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn ramp_reads_counters_and_stops_on_condition() {
        let f = Arc::new(Fake::default());
        let src = r#"
            assert(#streams() == 2)
            for r = 1000, 5000, 1000 do
              set_rate("a", r)
              sleep(0.001)
              if stats().a.packets >= 300 then stop() break end
            end
            pause("b")
            assert(rx() == nil)
            assert(not running())
        "#;
        run_source(
            src,
            "t.lua",
            f.clone(),
            Arc::new(AtomicBool::new(false)),
            true,
            Sandbox::On,
        )
        .unwrap();
        let r = f.rates.lock().unwrap().clone();
        assert_eq!(
            r.iter().map(|x| x.1).collect::<Vec<_>>(),
            vec![1000.0, 2000.0, 3000.0]
        );
        assert!(f.stopped.load(Ordering::SeqCst));
        assert_eq!(f.paused.lock().unwrap()[0], ("b".to_string(), true));
    }

    #[test]
    fn errors_are_one_line_with_location() {
        let f = Arc::new(Fake::default());
        let e = run_source(
            "set_rate('zz', 10)",
            "bad.lua",
            f.clone(),
            Arc::new(AtomicBool::new(false)),
            true,
            Sandbox::On,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("script bad.lua: "), "{e}");
        assert!(e.contains("no stream named 'zz'"), "{e}");
        assert!(!e.contains('\n'));
        let e = run_source(
            "x = = 1",
            "syn.lua",
            f.clone(),
            Arc::new(AtomicBool::new(false)),
            true,
            Sandbox::On,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("syn.lua"), "{e}");
        let e = run_source(
            "set_rate('a', -1)",
            "neg.lua",
            f,
            Arc::new(AtomicBool::new(false)),
            true,
            Sandbox::On,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("rate must be a number >= 0"), "{e}");
    }

    #[test]
    fn sleep_returns_early_when_stopped() {
        let f = Arc::new(Fake::default());
        let stop = Arc::new(AtomicBool::new(true));
        let t = Instant::now();
        let r = run_source(
            "assert(sleep(5) == false)",
            "s.lua",
            f,
            stop,
            true,
            Sandbox::On,
        );
        assert_eq!(r.unwrap(), Ended::Done);
        assert!(t.elapsed() < Duration::from_secs(2));
    }

    fn run_on(src: &str, sandbox: Sandbox) -> Result<Ended> {
        let f = Arc::new(Fake::default());
        run_source(
            src,
            "t.lua",
            f,
            Arc::new(AtomicBool::new(false)),
            true,
            sandbox,
        )
    }

    #[test]
    fn sleep_checks_its_argument() {
        for bad in ["math.huge", "-1", "0/0", "1e9"] {
            let e = run_on(&format!("sleep({bad})"), Sandbox::On)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("seconds must be a number from 0 to 86400"),
                "{bad}: {e}"
            );
            assert!(!e.contains('\n'), "{e}");
        }
        let e = run_on("sleep('soon')", Sandbox::On)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("script t.lua: ") && !e.contains('\n'), "{e}");
        assert_eq!(run_on("sleep(0)", Sandbox::On).unwrap(), Ended::Done);
    }

    #[test]
    fn the_sandbox_has_no_io_os_require_or_dofile() {
        for name in [
            "io", "os", "require", "package", "dofile", "loadfile", "debug",
        ] {
            let src = format!("assert({name} == nil, '{name} is there')");
            assert_eq!(run_on(&src, Sandbox::On).unwrap(), Ended::Done, "{name}");
        }
        assert_eq!(
            run_on(
                "assert(string.rep('a', 3) == 'aaa' and math.floor(1.5) == 1)",
                Sandbox::On
            )
            .unwrap(),
            Ended::Done
        );
        // --script-unsafe: the standard libraries, still without debug.
        let src = "assert(io ~= nil and os.time() > 0 and require ~= nil and debug == nil)";
        assert_eq!(run_on(src, Sandbox::Off).unwrap(), Ended::Done);
    }

    #[test]
    fn the_sandbox_reaches_no_bytecode() {
        // The issue's escape: bytecode made by string.dump, run by load.
        let e = run_on("load(string.dump(function() return 42 end))()", Sandbox::On)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("script t.lua: ") && !e.contains('\n'), "{e}");
        assert_eq!(
            run_on("assert(string.dump == nil)", Sandbox::On).unwrap(),
            Ended::Done
        );
        // Bytecode written by hand (a chunk's signature) is refused by
        // load whatever mode is asked for, and load says so.
        let src = r#"
            for _, mode in ipairs({"b", "bt", "t"}) do
              local f, err = load("\27Lua\x54\0", "x", mode)
              assert(f == nil and err:find("binary chunk"), mode .. ": " .. tostring(err))
            end
            local f, err = load(function() local s = "\27Lua" ; return nil end)
        "#;
        assert_eq!(run_on(src, Sandbox::On).unwrap(), Ended::Done);
        // A script file that is bytecode is not run either.
        let e = run_on("\x1bLua\x54\x00", Sandbox::On)
            .unwrap_err()
            .to_string();
        assert!(e.contains("binary chunk") && !e.contains('\n'), "{e}");
        // Text chunks work as Lua has them: name, environment, and an
        // absent environment (the globals) distinct from an explicit nil.
        let src = r#"
            assert(load("return 1 + 1")() == 2)
            assert(load("return x", "n", "t", {x = 5})() == 5)
            assert(load("return streams")() ~= nil)
            local f = load("return streams", "n", "t", nil)
            assert(not pcall(f))
            local parts = {"return ", "7"}
            local i = 0
            assert(load(function() i = i + 1; return parts[i] end)() == 7)
        "#;
        assert_eq!(run_on(src, Sandbox::On).unwrap(), Ended::Done);
    }

    #[test]
    fn a_busy_loop_ends_soon_after_the_stop() {
        spin_until_stopped("while true do end");
    }

    #[test]
    fn loops_in_coroutines_and_under_pcall_end_too() {
        spin_until_stopped("coroutine.wrap(function() while true do end end)()");
        spin_until_stopped("while true do pcall(function() while true do end end) end");
        spin_until_stopped(
            "while true do xpcall(function() while true do end end, function(e) return e end) end",
        );
        spin_until_stopped(
            "local co = coroutine.create(function() while true do end end)\n\
             while true do coroutine.resume(co); co = coroutine.create(function() while true do end end) end",
        );
    }

    #[test]
    fn memory_is_limited() {
        let e = run_on(
            "local t = {} for i = 1, 1e9 do t[i] = ('x'):rep(1000) .. i end",
            Sandbox::On,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("memory"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    fn spin_until_stopped(src: &'static str) {
        let f = Arc::new(Fake::default());
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let h = std::thread::spawn(move || run_source(src, "spin.lua", f, st, true, Sandbox::On));
        // The loop runs until the stop (it would run forever without it).
        std::thread::sleep(Duration::from_millis(200));
        assert!(!h.is_finished(), "the loop ended on its own");
        let t = Instant::now();
        stop.store(true, Ordering::SeqCst);
        let r = h.join().unwrap();
        assert_eq!(r.unwrap(), Ended::Interrupted);
        let dt = t.elapsed();
        assert!(dt >= GRACE && dt < Duration::from_secs(2), "{dt:?}");
    }
}
