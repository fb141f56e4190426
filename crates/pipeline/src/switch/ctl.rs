//! The requests of `linerate switch`'s control socket (one per line, see
//! [`crate::control`]), parsed before the switch acts on any of them.

use super::actions::{Group, Meter};
use super::rule::{MatchSpec, Rule};

/// One request line.
#[derive(Debug)]
pub enum Request {
    /// `add-flow RULE`
    AddFlow(Rule),
    /// `add-flows N`: N rule lines follow.
    AddFlows(usize),
    /// `del-flows [MATCH]`
    DelFlows(Option<MatchSpec>),
    /// `dump-flows [MATCH]`
    DumpFlows(Option<MatchSpec>),
    DumpPorts,
    DumpGroups,
    /// `add-group SPEC`
    AddGroup(Group),
    /// `add-meter SPEC`
    AddMeter(Meter),
    CacheStats,
}

/// The commands, for error messages.
pub const COMMANDS: &str =
    "add-flow, add-flows, del-flows, dump-flows, dump-ports, dump-groups, add-group, add-meter, cache-stats";

impl Request {
    /// Parse one request line; errors are one line.
    pub fn parse(line: &str) -> Result<Request, String> {
        let line = line.trim();
        let (cmd, arg) = line.split_once([' ', '\t']).unwrap_or((line, ""));
        let arg = arg.trim();
        let spec = |a: &str| -> Result<Option<MatchSpec>, String> {
            if a.is_empty() {
                Ok(None)
            } else {
                MatchSpec::parse(a).map(Some).map_err(|e| e.to_string())
            }
        };
        let none = |r: Request| -> Result<Request, String> {
            if arg.is_empty() {
                Ok(r)
            } else {
                Err(format!("{cmd} takes no argument"))
            }
        };
        match cmd {
            "add-flow" => Rule::parse(arg)
                .map(Request::AddFlow)
                .map_err(|e| e.to_string()),
            "add-flows" => arg.parse().map(Request::AddFlows).map_err(|_| {
                format!(
                    "add-flows '{}': expected the number of rule lines",
                    arg.escape_debug()
                )
            }),
            "del-flows" => spec(arg).map(Request::DelFlows),
            "dump-flows" => spec(arg).map(Request::DumpFlows),
            "dump-ports" => none(Request::DumpPorts),
            "dump-groups" => none(Request::DumpGroups),
            "add-group" => Group::parse(arg).map(Request::AddGroup),
            "add-meter" => Meter::parse(arg).map(Request::AddMeter),
            "cache-stats" => none(Request::CacheStats),
            "" => Err("empty command".into()),
            _ => Err(format!(
                "unknown command '{}' ({COMMANDS})",
                cmd.escape_debug()
            )),
        }
    }
}

/// Arbitrary bytes as a request line: no panic, errors are one line.
pub fn fuzz(data: &[u8]) {
    crate::control::fuzz_requests(data, Request::parse);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_errors_are_one_line() {
        assert!(matches!(
            Request::parse("add-flow priority=1,actions=drop"),
            Ok(Request::AddFlow(_))
        ));
        assert!(matches!(
            Request::parse("add-flows 3"),
            Ok(Request::AddFlows(3))
        ));
        assert!(matches!(
            Request::parse("dump-flows"),
            Ok(Request::DumpFlows(None))
        ));
        assert!(matches!(
            Request::parse("del-flows in_port=1"),
            Ok(Request::DelFlows(Some(_)))
        ));
        assert!(matches!(
            Request::parse(" cache-stats "),
            Ok(Request::CacheStats)
        ));
        for (bad, want) in [
            ("add-flows x\ty", "expected the number"),
            ("nope\u{7}", "unknown command 'nope\\u{7}'"),
            ("dump-ports 1", "takes no argument"),
            ("", "empty command"),
        ] {
            let e = Request::parse(bad).unwrap_err();
            assert!(e.contains(want) && !e.contains('\n'), "{bad:?}: {e}");
        }
        fuzz(b"add-flow \n\ndump-flows zz=1\nadd-meter meter=1\n");
    }
}
