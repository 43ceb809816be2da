//! The targets, one module per area.

#[cfg(feature = "transport")]
pub mod bulk;
pub mod config;
#[cfg(feature = "tools")]
pub mod json;
pub mod l3;
#[cfg(feature = "transport")]
pub mod quic;
pub mod router;
