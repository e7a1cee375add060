//! `push` and `save` against a real git http-backend: the lease, the report, faults.
