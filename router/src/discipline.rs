//! Choosing a discipline at run time: one configuration enum, one constructor.

use crate::cebinae::{Cebinae, CebinaeConfig};
use crate::choke::{Choke, ChokeConfig};
use crate::droptail::{DropTail, DropTailConfig};
use crate::qdisc::{ConfigError, PacketHandle, Qdisc};
use crate::red::{Red, RedConfig};
use crate::rrmqs::{Rrmqs, RrmqsConfig};

/// The configuration of any discipline.
#[derive(Clone, Debug, PartialEq)]
pub enum DisciplineConfig {
    /// [`DropTail`].
    DropTail(DropTailConfig),
    /// [`Red`].
    Red(RedConfig),
    /// [`Choke`].
    Choke(ChokeConfig),
    /// [`Cebinae`].
    Cebinae(CebinaeConfig),
    /// [`Rrmqs`].
    Rrmqs(RrmqsConfig),
}

impl DisciplineConfig {
    /// The discipline's name.
    pub fn name(&self) -> &'static str {
        match self {
            DisciplineConfig::DropTail(_) => "droptail",
            DisciplineConfig::Red(_) => "red",
            DisciplineConfig::Choke(_) => "choke",
            DisciplineConfig::Cebinae(_) => "cebinae",
            DisciplineConfig::Rrmqs(_) => "rrmqs",
        }
    }

    /// The configuration named `name` with its published defaults.
    pub fn default_for(name: &str) -> Option<DisciplineConfig> {
        Some(match name {
            "droptail" => DisciplineConfig::DropTail(DropTailConfig::default()),
            "red" => DisciplineConfig::Red(RedConfig::default()),
            "choke" => DisciplineConfig::Choke(ChokeConfig::default()),
            "cebinae" => DisciplineConfig::Cebinae(CebinaeConfig::default()),
            "rrmqs" => DisciplineConfig::Rrmqs(RrmqsConfig::default()),
            _ => return None,
        })
    }

    /// Check the configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            DisciplineConfig::DropTail(c) => c.validate(),
            DisciplineConfig::Red(c) => c.validate(),
            DisciplineConfig::Choke(c) => c.validate(),
            DisciplineConfig::Cebinae(c) => c.validate(),
            DisciplineConfig::Rrmqs(c) => c.validate(),
        }
    }

    /// Build the discipline behind a trait object.
    pub fn build<P: PacketHandle + 'static>(&self) -> Result<Box<dyn Qdisc<P>>, ConfigError> {
        Ok(match self {
            DisciplineConfig::DropTail(c) => Box::new(DropTail::new(c)?),
            DisciplineConfig::Red(c) => Box::new(Red::new(c)?),
            DisciplineConfig::Choke(c) => Box::new(Choke::new(c)?),
            DisciplineConfig::Cebinae(c) => Box::new(Cebinae::new(c)?),
            DisciplineConfig::Rrmqs(c) => Box::new(Rrmqs::new(c)?),
        })
    }
}
