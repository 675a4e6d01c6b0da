//! Backends that execute plans. Only the CPU backend exists so far.

pub mod cpu;
