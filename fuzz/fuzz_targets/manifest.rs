#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| git_session_fuzz::run(git_session::fuzzing::manifest, data));
