//! Backends that execute plans: the CPU backend, and the CUDA backend (planning always
//! built; the device layer behind feature `cuda`, the CPU emulator behind `cuda-emu`).

pub mod cpu;
pub mod cuda;
