//! Demo scenario TOML on arbitrary text: parsing never panics, an error
//! names the file, and a scenario that parses is valid and simulates
//! without panicking or running away (nfsdtop_agent::fuzzing).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        nfsdtop_agent::fuzzing::check_scenario(text);
    }
});
