//! Class maps on arbitrary text: parsing never panics, an error names a
//! line of the file, and a map that parses round-trips through its text
//! and classifies by the longest prefix (nfsdtop_agent::fuzzing).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        nfsdtop_agent::fuzzing::check_class_map(text);
    }
});
