//! # tollgate-tests
//!
//! End-to-end tests that cross crate boundaries (CCA + transport + router +
//! emulator). The test files live in `tests/tests/`.
