//! What a person or a program reads of an entity: the per-entity field
//! table every surface shows from ([`fields`]), the formatter of each
//! unit ([`units`]), and the batch outputs built on them ([`crate::output`]).

pub mod fields;
pub mod units;
