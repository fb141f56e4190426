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

use anyhow::{anyhow, Result};
use mlua::{Lua, Value};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Generator-side counters of one stream.
#[derive(Clone, Debug, Default)]
pub struct StreamCounters {
    pub name: String,
    pub packets: u64,
    pub bytes: u64,
    /// Rate over the last second (or since start).
    pub pps: f64,
}

/// Receiver-side counters of one stream.
#[derive(Clone, Debug, Default)]
pub struct RxCounters {
    pub name: String,
    pub packets: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
}

/// What a script may do to a running generator.
pub trait GenControl: Send + Sync {
    fn streams(&self) -> Vec<String>;
    fn set_rate_pps(&self, stream: &str, pps: f64) -> Result<(), String>;
    fn set_paused(&self, stream: &str, paused: bool) -> Result<(), String>;
    fn stats(&self) -> Vec<StreamCounters>;
    fn rx(&self) -> Option<Vec<RxCounters>>;
    /// Ask the generator to end.
    fn stop(&self);
    /// True once the generator ended (count/duration reached or stopped).
    fn finished(&self) -> bool;
}

fn lua_err(e: String) -> mlua::Error {
    mlua::Error::RuntimeError(e)
}

/// Run `path` to completion (or until `stop`). Errors are one line:
/// `script FILE: MESSAGE` with Lua's `[string]:LINE:` location kept.
pub fn run(
    path: &Path,
    ctl: Arc<dyn GenControl>,
    stop: Arc<AtomicBool>,
    quiet: bool,
) -> Result<()> {
    let src =
        std::fs::read_to_string(path).map_err(|e| anyhow!("script {}: {e}", path.display()))?;
    let name = path.display().to_string();
    run_source(&src, &name, ctl, stop, quiet)
}

/// As [`run`], from a string (tests, `-e`).
pub fn run_source(
    src: &str,
    name: &str,
    ctl: Arc<dyn GenControl>,
    stop: Arc<AtomicBool>,
    quiet: bool,
) -> Result<()> {
    let lua = Lua::new();
    let one_line = |e: mlua::Error| {
        anyhow!(
            "script {name}: {}",
            e.to_string().lines().next().unwrap_or("error").trim()
        )
    };
    let g = lua.globals();
    let t0 = Instant::now();
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
                let end = Instant::now() + Duration::from_secs_f64(secs.max(0.0));
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
    lua.load(src).set_name(name).exec().map_err(one_line)
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
        run_source("assert(sleep(5) == false)", "s.lua", f, stop, true).unwrap();
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}
