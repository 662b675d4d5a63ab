//! What a person or a program reads of an entity: the per-entity field
//! table every surface shows from ([`fields`]), the formatter of each
//! unit ([`units`]), the fairness vocabulary ([`fairness`]), and the batch
//! outputs built on them ([`crate::present::output`]).

pub mod fairness;
pub mod fields;
pub mod output;
pub mod units;
