use core::fmt;

/// Why a buffer could not be parsed or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the header or than a length field says.
    Truncated,
    /// The IP version field is not the one expected.
    BadVersion,
    /// A header-length field is too small (IPv4 IHL < 5, TCP data offset < 5).
    BadHeaderLen,
    /// A length field is inconsistent (e.g. IPv4 total length < header length).
    BadLength,
    /// More IPv6 extension headers than [`crate::ipv6::MAX_EXT_HEADERS`].
    TooManyExtHeaders,
    /// A well-formed header of a kind this crate does not handle (e.g. ARP over non-Ethernet).
    Unsupported,
    /// Emit/build: the output buffer is too small.
    BufferTooSmall,
    /// Emit/build: the parameters are invalid (e.g. more than 2 VLAN tags, payload too large).
    BadParam,
}

impl Error {
    /// Short snake_case name, suitable for a drop-reason counter.
    pub const fn as_str(self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::BadVersion => "bad_version",
            Error::BadHeaderLen => "bad_header_len",
            Error::BadLength => "bad_length",
            Error::TooManyExtHeaders => "too_many_ext_headers",
            Error::Unsupported => "unsupported",
            Error::BufferTooSmall => "buffer_too_small",
            Error::BadParam => "bad_param",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Truncated => {
                "truncated packet: buffer shorter than a header or its length field"
            }
            Error::BadVersion => "malformed packet: wrong IP version",
            Error::BadHeaderLen => "malformed packet: header length field too small",
            Error::BadLength => "malformed packet: inconsistent length field",
            Error::TooManyExtHeaders => "malformed packet: too many IPv6 extension headers",
            Error::Unsupported => "unsupported packet: header kind not handled",
            Error::BufferTooSmall => "output buffer too small for the packet",
            Error::BadParam => "invalid packet parameters",
        };
        f.write_str(s)
    }
}

impl core::error::Error for Error {}
