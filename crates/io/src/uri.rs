//! Port names: `scheme:target?key=value&key=value`.
//!
//! `afxdp:veth0?queue=0&mode=native`, `afpacket:eth1?ring=v3&fanout=hash`,
//! `pcap:trace.pcapng?loop=3`, `mem:a`. Parsing is strict: unknown keys are
//! an error naming the key, so a typo never silently changes a benchmark.

use crate::error::PortError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uri {
    /// The whole string as the user wrote it (used in messages).
    pub text: String,
    pub scheme: String,
    pub target: String,
    pub params: Vec<(String, String)>,
}

/// Schemes linerate knows.
pub const SCHEMES: [&str; 4] = ["afxdp", "afpacket", "pcap", "mem"];

impl Uri {
    pub fn parse(s: &str) -> Result<Uri, PortError> {
        let (scheme, rest) = s.split_once(':').ok_or_else(|| {
            PortError::new(format!(
                "port '{s}': expected SCHEME:TARGET with SCHEME one of {}",
                SCHEMES.join(", ")
            ))
        })?;
        if !SCHEMES.contains(&scheme) {
            return Err(PortError::new(format!(
                "port '{s}': unknown scheme '{scheme}' (known: {})",
                SCHEMES.join(", ")
            )));
        }
        let (target, query) = match rest.split_once('?') {
            Some((t, q)) => (t, q),
            None => (rest, ""),
        };
        if target.is_empty() {
            return Err(PortError::new(format!(
                "port '{s}': empty target after '{scheme}:'"
            )));
        }
        let mut params = Vec::new();
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            if k.is_empty() {
                return Err(PortError::new(format!(
                    "port '{s}': empty parameter name in '{kv}'"
                )));
            }
            if params.iter().any(|(pk, _): &(String, String)| pk == k) {
                return Err(PortError::new(format!(
                    "port '{s}': parameter '{k}' given twice"
                )));
            }
            params.push((k.to_string(), v.to_string()));
        }
        Ok(Uri {
            text: s.to_string(),
            scheme: scheme.to_string(),
            target: target.to_string(),
            params,
        })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Parse a parameter with `FromStr`, or return the default when absent.
    pub fn get_or<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, PortError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                PortError::new(format!(
                    "port '{}': bad value '{v}' for parameter '{key}'",
                    self.text
                ))
            }),
        }
    }

    /// A parameter restricted to a set of words.
    pub fn get_choice<'a>(
        &self,
        key: &str,
        choices: &[&'a str],
        default: &'a str,
    ) -> Result<&'a str, PortError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => choices.iter().copied().find(|c| *c == v).ok_or_else(|| {
                PortError::new(format!(
                    "port '{}': parameter '{key}' must be one of {} (got '{v}')",
                    self.text,
                    choices.join("|")
                ))
            }),
        }
    }

    /// A boolean parameter: 1/0, true/false, yes/no, on/off; bare `key` means true.
    pub fn get_bool(&self, key: &str, default: bool) -> Result<bool, PortError> {
        match self.get(key) {
            None => Ok(default),
            Some("" | "1" | "true" | "yes" | "on") => Ok(true),
            Some("0" | "false" | "no" | "off") => Ok(false),
            Some(v) => Err(PortError::new(format!(
                "port '{}': parameter '{key}' must be 0 or 1 (got '{v}')",
                self.text
            ))),
        }
    }

    /// Error on any parameter not in `known`.
    pub fn check_known(&self, known: &[&str]) -> Result<(), PortError> {
        for (k, _) in &self.params {
            if !known.contains(&k.as_str()) {
                return Err(PortError::new(format!(
                    "port '{}': unknown parameter '{k}' for {} (known: {})",
                    self.text,
                    self.scheme,
                    known.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// An error about this port, as one line.
    pub fn err(&self, msg: impl std::fmt::Display) -> PortError {
        PortError::new(format!("port '{}': {msg}", self.text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let u = Uri::parse("afxdp:veth0?queue=1&mode=native&zerocopy").unwrap();
        assert_eq!(u.scheme, "afxdp");
        assert_eq!(u.target, "veth0");
        assert_eq!(u.get_or("queue", 0u32).unwrap(), 1);
        assert_eq!(
            u.get_choice("mode", &["native", "generic"], "native")
                .unwrap(),
            "native"
        );
        assert!(u.get_bool("zerocopy", false).unwrap());
        assert!(u
            .check_known(&["queue", "mode"])
            .unwrap_err()
            .to_string()
            .contains("zerocopy"));
        let e = Uri::parse("foo:bar").unwrap_err().to_string();
        assert!(e.contains("unknown scheme 'foo'"), "{e}");
        assert!(Uri::parse("nocolon").is_err());
        assert!(Uri::parse("mem:").is_err());
        assert!(Uri::parse("mem:a?x=1&x=2").is_err());
        let u = Uri::parse("pcap:/tmp/a.pcap?loop=x").unwrap();
        assert!(u
            .get_or("loop", 1u32)
            .unwrap_err()
            .to_string()
            .contains("'loop'"));
        assert!(!Uri::parse("mem:a")
            .unwrap()
            .to_string_lossy()
            .contains('\n'));
    }

    impl Uri {
        fn to_string_lossy(&self) -> String {
            self.text.clone()
        }
    }
}
