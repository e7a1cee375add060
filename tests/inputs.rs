//! Bad input is refused with exit 2 before any network I/O.
