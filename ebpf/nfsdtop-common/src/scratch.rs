//! Per-CPU scratch room (`SCRATCH`): one entry per program that may be
//! under way at once on a CPU. The kernel never runs one program twice at
//! once on a CPU, but where it can preempt programs, different ones can
//! be under way there together: each slot's raw (or typed) program and
//! its rescue program ([`crate::twin`]) have their own.

use super::Slot;

/// Which of a slot's programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
    /// The raw or typed program.
    Main = 0,
    /// Its rescue program ([`super::twin`]).
    Rescue = 1,
}

pub const ENTRIES: u32 = 2 * Slot::COUNT as u32;

/// The entry of slot `slot`'s program `runner`.
#[inline(always)]
pub const fn entry(slot: Slot, runner: Runner) -> u32 {
    2 * slot as u32 + runner as u32
}
