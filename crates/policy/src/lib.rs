//! The loomfs policy engine (`loom policy`): what RobinHood does for
//! Lustre, built in. A catalog of every inode ([`catalog`]) in an
//! embedded SQLite file or a PostgreSQL server ([`db`]), filled by a
//! parallel scan of every MDT ([`scan`]) and kept current by their
//! changelogs ([`follow`]); reports from it ([`report`]); and rules
//! ([`rules`]) that purge, migrate and alert ([`act`]).
#![warn(missing_docs)]

pub mod act;
pub mod catalog;
pub mod db;
pub mod follow;
pub mod report;
pub mod rules;
pub mod scan;

pub use catalog::Catalog;
pub use report::Report;
pub use rules::Rules;
