//! Wire formats: typed, allocation-free views over byte buffers.
//!
//! Every parser takes untrusted bytes and returns `Err` on truncated or
//! malformed input; none of them panics or allocates.
